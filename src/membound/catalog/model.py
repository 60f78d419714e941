"""Transformer descriptions: the shapes that decide how many bytes and FLOPs a token costs.

A `Model` holds the architecture (layers, widths, GQA, MoE, MLA, sparse attention, sliding windows) and derives
parameter counts, KV-cache bytes and FLOPs from it; nothing is typed in twice. Counts are
parameters (floats, not billions); bytes are bytes; FLOPs count a multiply-add as 2.
Presets live in `membound/data/models/*.yaml`; `Model.from_hf_config` reads a local
Hugging Face config.json (no network, no transformers).
"""
from __future__ import annotations

import functools
import re
from importlib import resources
from pathlib import Path
from typing import Annotated, Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator, model_validator

from ._data import invalid_input, read_json, read_yaml, validate
from .dtypes import get_dtype
from . import names
from ..errors import InvalidInputError, ProfileError, short_repr
from ..base.display import model_text, model_html

# Upper bounds keep a hostile config from becoming a billion-iteration loop (the fuzz test found
# num_hidden_layers=10**9): far beyond any real model, well inside float arithmetic.
Pos = Annotated[int, Field(gt=0, le=10**9, strict=True)]
NonNeg = Annotated[int, Field(ge=0, le=10**9, strict=True)]
Layers = Annotated[int, Field(gt=0, le=100_000, strict=True)]
Flag = Annotated[bool, Field(strict=True)]


class Model(BaseModel):
    """One decoder-only transformer. Sizes are element counts; see docs/physics.md for the physics."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    n_layers: Layers
    hidden_size: Pos
    n_heads: Pos
    n_kv_heads: Pos                 # GQA/MQA; divides n_heads
    head_dim: Pos
    ffn_size: NonNeg                # dense FFN intermediate size; 0 when every layer is MoE
    gated_ffn: Flag = True          # SwiGLU/GeGLU: 3 matrices, else 2
    vocab_size: Pos
    tied_embeddings: Flag = False
    qkv_bias: Flag = False
    attn_out_bias: Flag = False     # bias on the output projection (gpt-oss)
    mlp_bias: Flag = False          # biases on FFN/expert matrices and the router (gpt-oss)
    qk_norm: Flag = False           # RMSNorm on q and k, head_dim weights each (Qwen3, Gemma 3)
    attn_sinks: Flag = False        # one learned sink logit per head (gpt-oss)
    norms_per_layer: NonNeg = 2     # hidden-sized norms per layer (Gemma 3 has 4)
    # MoE (n_experts == 0: dense)
    n_experts: NonNeg = 0
    experts_per_token: NonNeg = 0
    n_shared_experts: NonNeg = 0
    expert_ffn_size: NonNeg = 0     # intermediate size of one routed (and shared) expert
    first_dense_layers: NonNeg = 0  # leading layers with the dense FFN (DeepSeek-V3: 3)
    moe_layer_interval: Pos = 1     # after the leading dense layers, every k-th layer is MoE
    # MLA (DeepSeek): kv_lora_rank > 0 switches it on
    q_lora_rank: NonNeg = 0
    kv_lora_rank: NonNeg = 0
    qk_rope_head_dim: NonNeg = 0
    qk_nope_head_dim: NonNeg = 0
    v_head_dim: NonNeg = 0
    layer_windows: tuple[Annotated[int, Field(gt=0, strict=True)] | None, ...] = ()  # per layer; None = global
    # Gated DeltaNet linear attention (Qwen3-Next, Qwen3.5): full_attention_interval k > 0 makes every
    # k-th layer full attention and the others linear, with a fixed recurrent state per sequence
    full_attention_interval: NonNeg = 0
    linear_key_heads: NonNeg = 0
    linear_value_heads: NonNeg = 0
    linear_key_head_dim: NonNeg = 0
    linear_value_head_dim: NonNeg = 0
    linear_conv_kernel: NonNeg = 0
    attn_output_gate: Flag = False  # q_proj also yields a sigmoid gate on the attention output (2x q)
    # DeepSeek Sparse Attention (DeepSeek-V3.2): index_topk > 0 makes each query attend only the
    # index_topk cached tokens a lightning indexer scores highest; the indexer scores every cached
    # token with index_n_heads heads of index_head_dim over its own key cache (fp8, one fp32 scale
    # per 128 elements). The main KV cache still holds every token.
    index_topk: NonNeg = 0
    index_n_heads: NonNeg = 0
    index_head_dim: NonNeg = 0
    shared_expert_gate: Flag = False  # a hidden -> 1 gate on the shared expert (Qwen MoE)
    max_context: Pos | None = None  # max_position_embeddings, tokens
    # the Hugging Face config's model_type ("falcon"), spelled as there (lower case: "Falcon" would never
    # match): llama.cpp's quantizer picks a Falcon's output-tensor format by it (quantization.py); "" = not given
    model_type: str = ""
    source: str = ""
    aliases: tuple[str, ...] = ()   # Hugging Face ids and other spellings (membound.catalog.names)
    # aliases that name a release with the same weights' shapes but a context window of its own
    # (Qwen3's 2507 releases: 262144 positions where the April 2025 ones have 40960): loading the
    # preset by that alias gives the release's max_context (`load_model`)
    variant_contexts: dict[str, Pos] = {}

    _d: dict = PrivateAttr(default_factory=dict)

    @field_validator("model_type")
    @classmethod
    def _model_type_as_spelled(cls, v: str) -> str:
        if not re.fullmatch(r"[a-z0-9_\-]{0,64}", v):
            raise InvalidInputError("model_type", v, "the Hugging Face config's model_type as spelled there: "
                                    "lower case letters, digits, '_' or '-' (e.g. 'falcon'), or '' (not given)")
        return v

    def __init__(self, **data: Any):
        """Build and validate; a bad field raises InvalidInputError naming it."""
        try:
            super().__init__(**data)
        except ValidationError as e:
            raise invalid_input(e, data.get("name")) from None

    def __hash__(self) -> int:
        """By name: consistent with equality (which compares every field), and one string hash
        instead of pydantic's hash of all ~40 fields on each `estimate()`'s cache lookup; models
        sharing a name (a preset's variants) only share a hash bucket."""
        return hash(self.name)

    @field_validator("name")
    @classmethod
    def _name_form(cls, v: str) -> str:
        if not v or v != v.lower() or " " in v:
            raise ValueError("expected a lower-case name with hyphens, e.g. 'llama-3.1-8b'")
        return v

    @model_validator(mode="after")
    def _check_and_count(self):
        def bad(field, expected):
            raise InvalidInputError(field, getattr(self, field), expected, where=self.name)
        if self.n_heads % self.n_kv_heads:
            bad("n_kv_heads", f"a divisor of n_heads={self.n_heads}")
        if set(self.variant_contexts) - set(self.aliases):
            bad("variant_contexts", f"keys among the aliases {list(self.aliases)}")
        if self.layer_windows and len(self.layer_windows) != self.n_layers:
            bad("layer_windows", f"{self.n_layers} entries (one per layer) or none")
        if self.first_dense_layers > self.n_layers:
            bad("first_dense_layers", f"at most n_layers={self.n_layers}")
        if self.n_experts:
            if not 1 <= self.experts_per_token <= self.n_experts:
                bad("experts_per_token", f"1..n_experts={self.n_experts}")
            if self.expert_ffn_size <= 0:
                bad("expert_ffn_size", "> 0 for an MoE model")
        else:
            for f in ("experts_per_token", "n_shared_experts", "expert_ffn_size"):
                if getattr(self, f):
                    bad(f, "0 for a dense model (n_experts=0)")
        if self.kv_lora_rank:
            for f in ("qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim"):
                if getattr(self, f) <= 0:
                    bad(f, "> 0 when kv_lora_rank > 0 (MLA)")
        if self.full_attention_interval:
            for f in ("linear_key_heads", "linear_value_heads", "linear_key_head_dim", "linear_value_head_dim",
                      "linear_conv_kernel"):
                if getattr(self, f) <= 0:
                    bad(f, "> 0 when full_attention_interval > 0 (linear attention)")
        if self.index_topk:
            for f in ("index_n_heads", "index_head_dim", "q_lora_rank"):
                if getattr(self, f) <= 0:
                    bad(f, "> 0 when index_topk > 0 (DeepSeek Sparse Attention's indexer reads MLA's q latent)")
            if self.layer_windows or self.full_attention_interval:
                bad("index_topk", "0 with sliding windows or linear attention (one sparse pattern a model)")
        moe = [self._is_moe(i) for i in range(self.n_layers)]
        if not all(moe) and self.ffn_size <= 0:
            bad("ffn_size", "> 0: some layers use the dense FFN")
        self._d.update(self._count(sum(moe)))
        return self

    def _is_linear(self, i: int) -> bool:
        k = self.full_attention_interval
        return k > 0 and (i + 1) % k != 0

    def _is_moe(self, i: int) -> bool:
        j = i - self.first_dense_layers
        return self.n_experts > 0 and j >= 0 and (j + 1) % self.moe_layer_interval == 0

    def _ffn(self, size: int) -> int:
        h = self.hidden_size
        bias = ((2 if self.gated_ffn else 1) * size + h) if self.mlp_bias else 0
        return (3 if self.gated_ffn else 2) * h * size + bias

    def _count(self, n_moe: int) -> dict:
        h, nh, kvh, hd = self.hidden_size, self.n_heads, self.n_kv_heads, self.head_dim
        if self.kv_lora_rank:   # MLA: low-rank q and a shared compressed kv latent
            r, nope, v = self.qk_rope_head_dim, self.qk_nope_head_dim, self.v_head_dim
            qk = nope + r
            q = (h * self.q_lora_rank + self.q_lora_rank + self.q_lora_rank * nh * qk
                 if self.q_lora_rank else h * nh * qk)
            attn = (q + h * (self.kv_lora_rank + r) + self.kv_lora_rank
                    + self.kv_lora_rank * nh * (nope + v) + nh * v * h)
            kv_el = self.kv_lora_rank + r
            # decode runs the absorbed form: every head scores its query against the cached
            # latent + rope key (kv_lora_rank + r) and sums the latent (kv_lora_rank) per token;
            # prefill decompresses keys and values once per token (counted in the params) and
            # attends per head over qk and v dims, the cheaper form for many queries
            attn_flops = 2.0 * nh * (2 * self.kv_lora_rank + r)
            prefill_attn_flops = 2.0 * nh * (qk + v)
        else:
            attn = h * nh * hd * 2 + h * kvh * hd * 2
            attn += (nh + 2 * kvh) * hd * self.qkv_bias + h * self.attn_out_bias
            attn += 2 * hd * self.qk_norm + h * nh * hd * self.attn_output_gate
            kv_el = 2 * kvh * hd
            attn_flops = prefill_attn_flops = 4.0 * nh * hd
        attn += nh * self.attn_sinks
        # the lightning indexer: wq_b from the q latent to its heads, wk from the hidden state to its
        # one key, that key's LayerNorm (weight and bias), weights_proj to one weight per head
        ih, idim = self.index_n_heads, self.index_head_dim
        attn += self.q_lora_rank * ih * idim + h * idim + 2 * idim + h * ih if self.index_topk else 0
        n_lin = sum(self._is_linear(i) for i in range(self.n_layers))
        lin_attn, state = self._linear_attention()
        common = attn + self.norms_per_layer * h
        expert = self._ffn(self.expert_ffn_size) if self.n_experts else 0
        router = (h * self.n_experts + self.n_experts * self.mlp_bias) if self.n_experts else 0
        router += h * self.shared_expert_gate * (self.n_shared_experts > 0)
        moe_layer = common + (self.n_experts + self.n_shared_experts) * expert + router
        dense_layer = common + self._ffn(self.ffn_size)
        total = (n_moe * moe_layer + (self.n_layers - n_moe) * dense_layer + n_lin * (lin_attn - attn)
                 + self.vocab_size * h * (1 if self.tied_embeddings else 2) + h)
        routed = n_moe * self.n_experts * expert
        return dict(total=float(total), expert=float(expert), n_moe=n_moe,
                    dense=float(total - routed),
                    active=float(total - n_moe * (self.n_experts - self.experts_per_token) * expert),
                    kv_el=kv_el, attn_flops=attn_flops, prefill_attn_flops=prefill_attn_flops, state=state,
                    state_window=-(-state // kv_el) if state else 0)

    def _linear_attention(self) -> tuple[int, int]:
        """(parameters of one Gated DeltaNet layer, elements of its recurrent state per sequence):
        in_proj_qkvz h x (2 key + 2 value dims), in_proj_ba h x 2 value heads, a depthwise conv over
        q, k, v of `linear_conv_kernel` taps, dt_bias and A_log per value head, a gated RMSNorm of
        value_head_dim, out_proj value dim x h. State: value heads x key dim x value dim, plus the
        conv's last kernel - 1 inputs."""
        if not self.full_attention_interval:
            return 0, 0
        h, kern = self.hidden_size, self.linear_conv_kernel
        key, value = self.linear_key_heads * self.linear_key_head_dim, self.linear_value_heads * self.linear_value_head_dim
        conv = 2 * key + value
        params = (h * (2 * key + 2 * value) + h * 2 * self.linear_value_heads + conv * kern
                  + 2 * self.linear_value_heads + self.linear_value_head_dim + value * h)
        state = self.linear_value_heads * self.linear_key_head_dim * self.linear_value_head_dim + conv * (kern - 1)
        return params, state

    # ---- derived (computed once at validation) -------------------------------------------------
    @property
    def total_params(self) -> float:
        """Every parameter, embeddings included (one matrix when tied)."""
        return self._d["total"]

    @property
    def active_params(self) -> float:
        """Parameters one token uses: total minus the E - k routed experts it skips."""
        return self._d["active"]

    @property
    def expert_params(self) -> float:
        """Parameters of one routed expert in one MoE layer (gated: 3*hidden*expert_ffn_size)."""
        return self._d["expert"]

    @property
    def n_moe_layers(self) -> int:
        """Layers whose FFN is routed experts."""
        return self._d["n_moe"]

    @property
    def dense_params(self) -> float:
        """Parameters read whatever the routing: all but the routed experts."""
        return self._d["dense"]

    @property
    def kv_elements_per_token_per_layer(self) -> int:
        """Cached elements per token per layer: 2*kv_heads*head_dim; MLA kv_lora_rank + rope dim."""
        return self._d["kv_el"]

    @property
    def attn_flops_per_ctx_token_per_layer(self) -> float:
        """FLOPs one new token spends on one cached token in one layer in decode (QK^T and AV,
        2 per MAC; MLA: the absorbed form over the latent)."""
        return self._d["attn_flops"]

    @property
    def prefill_attn_flops_per_pair(self) -> float:
        """FLOPs per (query, key) pair in one layer in prefill (MLA: keys/values decompressed per
        head; others: the same as decode)."""
        return self._d["prefill_attn_flops"]

    @property
    def linear_state_elements(self) -> int:
        """Recurrent-state elements of one linear-attention layer per sequence (0: none)."""
        return self._d["state"]

    @property
    def linear_state_window(self) -> int:
        """Tokens of KV holding as many elements as that state: the window a linear layer is described with."""
        return self._d["state_window"]

    @property
    def index_bytes_per_token_per_layer(self) -> float:
        """Bytes of the sparse-attention indexer's key cache per token per layer: fp8 keys and one
        fp32 scale per 128 (DeepSeek-V3.2's inference code: k_cache float8_e4m3fn, k_scale_cache
        float32 of head_dim // 128); 0 without an indexer. Held and read whatever the KV format."""
        return float(self.index_head_dim + 4 * -(-self.index_head_dim // 128)) if self.index_topk else 0.0

    @property
    def index_flops_per_ctx_token_per_layer(self) -> float:
        """FLOPs the indexer spends scoring one cached token for one query in one layer: a dot
        product of index_head_dim per index head (2 per MAC); 0 without an indexer."""
        return 2.0 * self.index_n_heads * self.index_head_dim if self.index_topk else 0.0

    @property
    def is_moe(self) -> bool:
        return self.n_experts > 0

    def model_copy(self, *, update=None, deep=False) -> Model:
        """A copy; with `update`, validated and counted again."""
        return Model(**{**self.model_dump(), **update}) if update else super().model_copy(deep=deep)

    def window_groups(self) -> tuple[tuple[int | None, int], ...]:
        """((window or None for global, number of layers), ...) in order of first appearance.

        A linear-attention layer keeps a fixed recurrent state instead of a growing KV cache; it is
        described as a sliding-window layer whose window holds as many elements as that state
        (`linear_state_window` tokens of KV): the bytes it reads and holds per sequence are then
        those of the state once the context passes the window (less before), and its attention
        FLOPs those of attending that many tokens (the same order as the state update)."""
        groups: dict = {}
        windows = self.layer_windows or (None,) * self.n_layers
        for i, w in enumerate(windows):
            w = self._d["state_window"] if self._is_linear(i) else w
            groups[w] = groups.get(w, 0) + 1
        return tuple(groups.items())

    def attended_groups(self) -> tuple[tuple[int | None, int], ...]:
        """As `window_groups`, for the tokens a query attends to: with sparse attention every layer
        attends at most index_topk tokens (as a window of that size would), though it holds all."""
        return ((self.index_topk, self.n_layers),) if self.index_topk else self.window_groups()

    def context_layer_tokens(self, context, held: bool = False):
        """Sum over layers of the cached tokens a query attends to at `context` (min(context, window);
        with `held`, the tokens the cache holds, all of them under sparse attention). Arrays ok."""
        c = _check_context(context)
        groups = self.window_groups() if held else self.attended_groups()
        out = sum(n * (c if w is None else np.minimum(c, w)) for w, n in groups)
        return float(out) if np.ndim(out) == 0 else out

    def weight_bytes(self, dtype="bf16") -> float:
        """Bytes of all weights stored in `dtype` (block scales included)."""
        return self.total_params * get_dtype(dtype).bytes

    def kv_bytes_per_token(self, kv_dtype="bf16", context=None):
        """KV bytes of one token over all layers (a sparse-attention indexer's keys included); with
        `context`, of a whole sequence of that many tokens, sliding-window layers holding at most
        their window."""
        per = self.kv_elements_per_token_per_layer * get_dtype(kv_dtype).bytes + self.index_bytes_per_token_per_layer
        return per * (self.n_layers if context is None else self.context_layer_tokens(context, held=True))

    def flops_per_token(self, context=0):
        """FLOPs to produce one token with `context` cached tokens: 2*active + attention (+ the
        sparse-attention indexer scoring every cached token)."""
        return (2.0 * self.active_params + self.attn_flops_per_ctx_token_per_layer * self.context_layer_tokens(context)
                + self.index_flops_per_ctx_token_per_layer * self.context_layer_tokens(context, held=True))

    def __repr__(self) -> str:
        moe = f", {self.experts_per_token}/{self.n_experts} experts" if self.n_experts else ""
        return (f"Model({self.name!r}, {self.total_params / 1e9:.2f}B params, "
                f"{self.active_params / 1e9:.2f}B active{moe})")

    def __str__(self) -> str:
        return model_text(self)

    def _repr_html_(self) -> str:
        return model_html(self)

    @classmethod
    def from_hf_config(cls, path_or_dict, name: str | None = None) -> Model:
        """Read a local Hugging Face config.json (a file, its folder, or the parsed dict)."""
        cfg, src, folder = _read_config(path_or_dict)
        return _validated(_convert(cfg, src, name or cfg.get("_name_or_path") or folder), src)


def _validated(data: dict, src: str) -> Model:
    """Model from a data file's fields; any problem is a ProfileError naming file and field."""
    try:
        return Model.model_validate(data)
    except ValidationError as e:
        orig = (e.errors()[0].get("ctx") or {}).get("error")
        if isinstance(orig, InvalidInputError):
            raise ProfileError(src, orig.field, f"value {short_repr(orig.value)}: expected {orig.expected}") from None
    return validate(Model, data, src)


def _check_context(context):
    c = np.asarray(context)
    if c.dtype.kind not in "iuf" or not np.all(np.isfinite(c)) or np.any(c < 0):
        raise InvalidInputError("context", context, "a finite, non-negative number of tokens")
    return c if c.ndim else c.item()


# ---- Hugging Face configs -----------------------------------------------------------------
# Qwen3-Next / Qwen3.5 / 3.6: Gated DeltaNet layers between gated full-attention ones (no sliding window)
_QWEN_HYBRIDS = ("qwen3_next", "qwen3_5_text", "qwen3_5_moe_text")
_FAMILIES = ("llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "qwen3_next",
             "qwen3_5_text", "qwen3_5_moe_text", "glm4_moe", "kimi_k2", "minimax_m2", "llama4_text", "falcon", "mpt",
             "deepseek_v2", "deepseek_v3", "deepseek_v32", "glm_moe_dsa", "gemma", "gemma2", "gemma3", "gemma3_text",
             "phi3", "gpt_oss", "cohere", "gptj")
# transformers' Gemma3TextConfig defaults: the released config.json files omit these keys
_GEMMA3_DEFAULTS = dict(vocab_size=262_208, num_attention_heads=8, num_key_value_heads=4,
                        head_dim=256, sliding_window=4096, sliding_window_pattern=6,
                        tie_word_embeddings=True)


def _read_config(path_or_dict):
    if isinstance(path_or_dict, dict):
        return path_or_dict, "<config dict>", None
    if not isinstance(path_or_dict, (str, Path)):
        raise InvalidInputError("path_or_dict", path_or_dict, "a path to config.json or a dict")
    p = Path(path_or_dict)
    if p.is_dir():
        p = p / "config.json"
    if not p.is_file():
        raise ProfileError(str(p), "<file>", "no such file")
    cfg = read_json(p)
    if not isinstance(cfg, dict):
        raise ProfileError(str(p), "<top>", "expected a JSON object")
    return cfg, str(p), p.resolve().parent.name


def _convert(cfg: dict, src: str, name: str | None) -> dict:
    mt = cfg.get("model_type")
    if isinstance(cfg.get("text_config"), dict):   # multimodal wrappers: describe the text decoder
        cfg = {"model_type": f"{mt}_text" if mt == "gemma3" else mt, **cfg["text_config"]}
        mt = cfg["model_type"]
    if mt not in _FAMILIES:
        raise ProfileError(src, "model_type", f"value {short_repr(mt)} is not supported; expected one of {list(_FAMILIES)}")
    if mt.startswith("gemma3"):
        mt, cfg = "gemma3_text", {**_GEMMA3_DEFAULTS, **cfg}
    if mt == "mpt":
        cfg = _from_mpt(cfg)
    if mt == "gptj":
        cfg = _from_gptj(cfg)
    nothing = object()

    def get(key, default=nothing, positive=True, kind=int):
        v = cfg.get(key, nothing)
        if v is nothing or (v is None and default is not nothing):
            if default is nothing:
                raise ProfileError(src, key, "is missing; it is required for model_type " + repr(mt))
            return default
        if kind is int and (isinstance(v, bool) or not isinstance(v, int) or v < (1 if positive else 0)):
            sign = "positive" if positive else "non-negative"
            raise ProfileError(src, key, f"value {short_repr(v)}: expected a {sign} integer")
        if kind is bool and not isinstance(v, bool):
            raise ProfileError(src, key, f"value {short_repr(v)}: expected true or false")
        return v

    heads, hidden = get("num_attention_heads"), get("hidden_size")
    n_layers = get("num_hidden_layers")
    if cfg.get("head_dim") is None and hidden % heads:   # every released model divides or says
        raise ProfileError(src, "head_dim", f"is missing and num_attention_heads={heads} does not divide "
                                            f"hidden_size={hidden}; give head_dim (hidden // heads = "
                                            f"{hidden // heads} would be a guess)")
    d: dict = dict(
        name=str(name or mt).rstrip("/").split("/")[-1].lower().replace(" ", "-"),
        n_layers=n_layers, hidden_size=hidden, n_heads=heads,
        n_kv_heads=get("num_key_value_heads", heads), head_dim=get("head_dim", hidden // heads),
        vocab_size=get("vocab_size"),
        tied_embeddings=get("tie_word_embeddings", mt in ("gemma", "gemma2", "gemma3_text", "cohere"), kind=bool),
        max_context=get("max_position_embeddings", None), source=f"Hugging Face config {src} ({mt})",
        model_type=mt)
    bias = get("attention_bias", mt == "gpt_oss", kind=bool)
    d.update(qkv_bias=bias or mt in ("qwen2", "qwen2_moe"), attn_out_bias=bias and mt != "glm4_moe")
    qwen_hybrid = mt in _QWEN_HYBRIDS
    moe = mt in ("mixtral", "qwen2_moe", "qwen3_moe", "gpt_oss", "minimax_m2", "llama4_text", "qwen3_next", "qwen3_5_moe_text")
    if moe:
        d.update(_moe_fields(cfg, mt, get, n_layers, src))
    elif mt == "qwen3_5_text":   # the dense Qwen3.5 / 3.6: Gated DeltaNet layers with a dense SwiGLU FFN
        d.update(_linear_attention_fields(cfg, get, n_layers, src))
    elif mt.startswith("deepseek") or mt in ("kimi_k2", "glm4_moe", "glm_moe_dsa"):
        d.update(_deepseek_fields(mt, get, heads))
    if mt == "glm_moe_dsa":
        _refuse_shared_indexers(cfg, src)
    if mt == "falcon":
        d.update(_falcon_fields(cfg, get, heads, hidden))
    elif mt in ("mpt", "gptj"):
        d["gated_ffn"] = False     # GELU FFN
    if mt == "gptj":
        d["mlp_bias"] = True       # fc_in and fc_out carry biases
    if "ffn_size" not in d:
        d["ffn_size"] = get("intermediate_size_mlp" if mt == "llama4_text" else "intermediate_size") if _has_dense(d) else 0
    if mt in ("qwen3", "qwen3_moe", "gemma3_text") or qwen_hybrid:
        d["qk_norm"] = True
    if mt in ("glm4_moe", "minimax_m2"):
        d["qk_norm"] = get("use_qk_norm", mt == "minimax_m2", kind=bool)
    if mt in ("gemma2", "gemma3_text"):
        d["norms_per_layer"] = 4    # input, post-attention, pre- and post-feedforward RMSNorms
    if mt == "cohere":
        if get("use_qk_norm", False, kind=bool):    # Command R+: per-head LayerNorms on q and k, not described
            raise ProfileError(src, "use_qk_norm", "value True is not supported for model_type 'cohere'; expected false")
        d["norms_per_layer"] = 1    # one LayerNorm (weight only) feeds the parallel attention and FFN
    if mt == "gpt_oss":
        d.update(mlp_bias=True, attn_sinks=True)
    d["layer_windows"] = _windows(cfg, mt, n_layers, get, src)
    return d


def _refuse_shared_indexers(cfg: dict, src: str) -> None:
    """GLM-5.2's IndexShare: a "shared" layer reuses an earlier layer's top-k and holds no indexer of
    its own. Not described (every DSA layer here runs and stores its indexer), so refused."""
    shared = {"indexer_types": any(t != "full" for t in cfg.get("indexer_types") or ()),
              "index_topk_freq": cfg.get("index_topk_freq", 1) not in (None, 1),
              "index_topk_pattern": any(t not in ("F", "full") for t in cfg.get("index_topk_pattern") or ())}
    for key, found in shared.items():
        if found:
            raise ProfileError(src, key, f"value {short_repr(cfg[key])} is not supported: layers that share "
                                         "another layer's indexer (IndexShare) are not described; expected "
                                         "every layer to run its own indexer")


def _moe_fields(cfg: dict, mt: str, get, n_layers: int, src: str) -> dict:
    """Routed experts of the Mixtral, Qwen MoE, gpt-oss, MiniMax and Llama 4 families (Qwen3-Next /
    Qwen3.5: with their shared expert and Gated DeltaNet layers)."""
    qwen_hybrid = mt in ("qwen3_next", "qwen3_5_moe_text")
    d: dict = {}

    def key(usual: str, gpt_oss: str) -> int:   # gpt-oss's config.json may spell it its own way
        return get(gpt_oss) if mt == "gpt_oss" and usual not in cfg and gpt_oss in cfg else get(usual)

    local = mt in ("mixtral", "gpt_oss", "minimax_m2", "llama4_text")
    n_exp = key("num_local_experts" if local else "num_experts", "num_experts")
    k = key("num_experts_per_tok", "experts_per_token")
    eff = get("moe_intermediate_size" if "qwen" in mt else "intermediate_size")
    d.update(n_experts=n_exp, experts_per_token=k, expert_ffn_size=eff,
             moe_layer_interval=get("interleave_moe_layer_step" if mt == "llama4_text" else "decoder_sparse_step", 1))
    dense_only = cfg.get("mlp_only_layers") or []
    if not isinstance(dense_only, list) or list(dense_only) != list(range(len(dense_only))):
        raise ProfileError(src, "mlp_only_layers", f"value {short_repr(dense_only)}: expected a list of "
                                                  "leading layer indices [0, 1, ..., k-1]")
    d["first_dense_layers"] = len(dense_only)
    if mt == "qwen2_moe" or qwen_hybrid:
        shared = get("shared_expert_intermediate_size", 0, positive=False)
        if shared % eff:
            raise ProfileError(src, "shared_expert_intermediate_size", f"value {shared}: expected a multiple of {eff}")
        d["n_shared_experts"] = shared // eff
        d["shared_expert_gate"] = qwen_hybrid
    if mt == "llama4_text":
        d["n_shared_experts"] = 1      # Llama 4: one shared expert of the routed experts' size
    if qwen_hybrid:
        d.update(_linear_attention_fields(cfg, get, n_layers, src))
    return d


def _deepseek_fields(mt: str, get, heads: int) -> dict:
    """DeepSeek-style MoE keys (DeepSeek V2/V3/V3.2, Kimi K2, GLM-4.5, GLM-5) and, but for GLM-4.5, MLA
    (V3.2 and GLM-5: with DeepSeek Sparse Attention's indexer)."""
    d: dict = {}
    if mt != "glm4_moe":   # MLA (GLM-4.5 keeps GQA attention with DeepSeek-style MoE keys)
        nope, rope = get("qk_nope_head_dim"), get("qk_rope_head_dim")
        d.update(n_kv_heads=heads, head_dim=nope + rope, q_lora_rank=get("q_lora_rank", 0, positive=False),
                 kv_lora_rank=get("kv_lora_rank"), qk_nope_head_dim=nope, qk_rope_head_dim=rope,
                 v_head_dim=get("v_head_dim"))
    if mt in ("deepseek_v32", "glm_moe_dsa"):   # DeepSeek Sparse Attention
        d.update(index_topk=get("index_topk"), index_n_heads=get("index_n_heads"),
                 index_head_dim=get("index_head_dim"))
    d.update(n_experts=get("n_routed_experts", 0, positive=False),
             n_shared_experts=get("n_shared_experts", 0, positive=False))
    if d["n_experts"]:
        d.update(experts_per_token=get("num_experts_per_tok"), expert_ffn_size=get("moe_intermediate_size"),
                 first_dense_layers=get("first_k_dense_replace", 0, positive=False),
                 moe_layer_interval=get("moe_layer_freq", 1))
    return d


def _linear_attention_fields(cfg: dict, get, n_layers: int, src: str) -> dict:
    """Qwen3-Next / Qwen3.5 Gated DeltaNet layers: every `full_attention_interval`-th layer is full."""
    k = get("full_attention_interval", 4)
    types = cfg.get("layer_types")
    if types is not None:
        expected = ["full_attention" if (i + 1) % k == 0 else "linear_attention" for i in range(n_layers)]
        if types != expected:
            raise ProfileError(src, "layer_types", f"expected every {k}th layer full_attention, the others "
                               "linear_attention (the pattern full_attention_interval describes)")
    return dict(full_attention_interval=k, attn_output_gate=get("attn_output_gate", True, kind=bool),
                linear_key_heads=get("linear_num_key_heads"), linear_value_heads=get("linear_num_value_heads"),
                linear_key_head_dim=get("linear_key_head_dim"), linear_value_head_dim=get("linear_value_head_dim"),
                linear_conv_kernel=get("linear_conv_kernel_dim", 4))


def _falcon_fields(cfg: dict, get, heads: int, hidden: int) -> dict:
    """Falcon: multi-query (one K/V head) unless new_decoder_architecture (num_kv_heads groups); a
    GELU FFN of 4 x hidden; LayerNorms with bias: two per layer in the new architecture (4h), one
    shared by the parallel attention and MLP otherwise (2h); biases only when `bias`."""
    new = get("new_decoder_architecture", False, kind=bool)
    kv = get("num_kv_heads", heads) if new else (1 if get("multi_query", True, kind=bool) else heads)
    parallel = get("parallel_attn", True, kind=bool)
    bias = get("bias", False, kind=bool)
    return dict(n_kv_heads=kv, gated_ffn=False, ffn_size=get("ffn_hidden_size", 4 * hidden),
                norms_per_layer=4 if (new or not parallel) else 2, tied_embeddings=get("tie_word_embeddings", True, kind=bool),
                qkv_bias=bias, attn_out_bias=bias, mlp_bias=bias)


def _from_mpt(cfg: dict) -> dict:
    """MPT's keys in the Llama spelling: d_model, n_heads, n_layers, expansion_ratio x d_model FFN
    (GELU, not gated), max_seq_len, tied embeddings, LayerNorms without bias (no_bias)."""
    out = dict(cfg)
    for mine, theirs in (("hidden_size", "d_model"), ("num_attention_heads", "n_heads"),
                         ("num_hidden_layers", "n_layers"), ("max_position_embeddings", "max_seq_len")):
        if theirs in cfg:
            out[mine] = cfg[theirs]
    ratio = cfg.get("expansion_ratio", 4)
    if isinstance(cfg.get("d_model"), int) and isinstance(ratio, (int, float)) and not isinstance(ratio, bool):
        out["intermediate_size"] = int(ratio * cfg["d_model"])
    out.setdefault("tie_word_embeddings", True)
    return out


def _from_gptj(cfg: dict) -> dict:
    """GPT-J's keys in the Llama spelling: n_embd, n_head, n_layer, n_positions; n_inner (null: 4 x
    n_embd) is the GELU FFN's size. One LayerNorm with bias per layer feeds the parallel attention and
    FFN (2 x n_embd: the default norms_per_layer); the output head is not tied unless the config says so."""
    out = dict(cfg)
    for mine, theirs in (("hidden_size", "n_embd"), ("num_attention_heads", "n_head"),
                         ("num_hidden_layers", "n_layer"), ("max_position_embeddings", "n_positions")):
        if theirs in cfg:
            out[mine] = cfg[theirs]
    if cfg.get("n_inner") is None and isinstance(cfg.get("n_embd"), int):
        out["intermediate_size"] = 4 * cfg["n_embd"]
    elif "n_inner" in cfg:
        out["intermediate_size"] = cfg["n_inner"]
    out.setdefault("tie_word_embeddings", False)
    return out


def _has_dense(d: dict) -> bool:
    if not d.get("n_experts"):
        return True
    first, k = d.get("first_dense_layers", 0), d.get("moe_layer_interval", 1)
    return first > 0 or (k > 1 and d["n_layers"] > first)


def _windows(cfg, mt, n_layers, get, src) -> tuple:
    if mt in ("qwen2", "qwen2_moe", "qwen3", "qwen3_moe") and not cfg.get("use_sliding_window", False):
        return ()
    # phi3: the configs give one sliding_window (2047 in the 4k models, at or past the context in the
    # 128k ones) but no layers it applies to; llama.cpp disables it for the family (PR 13676)
    if mt in _QWEN_HYBRIDS or mt in ("mpt", "falcon", "phi3"):
        return ()
    if mt == "llama4_text":
        return _llama4_chunks(cfg, get, n_layers, src)
    w = get("sliding_window", None)
    if w is None:
        return ()
    types = cfg.get("layer_types")
    if types is not None:
        if not isinstance(types, list) or len(types) != n_layers:
            raise ProfileError(src, "layer_types", f"expected a list of {n_layers} entries")
        names = {"sliding_attention": w, "full_attention": None}
        for t in types:
            if t not in names:
                raise ProfileError(src, "layer_types", f"value {short_repr(t)}: expected one of {list(names)}")
        out = tuple(names[t] for t in types)
    elif mt == "gemma3_text":
        pattern = get("sliding_window_pattern", 6)
        out = tuple(None if (i + 1) % pattern == 0 else w for i in range(n_layers))
    elif mt in ("gpt_oss", "gemma2"):    # even layers slide, odd layers are global
        out = tuple(w if i % 2 == 0 else None for i in range(n_layers))
    elif mt.startswith("qwen"):
        first = get("max_window_layers", n_layers, positive=False)
        out = tuple(w if i >= first else None for i in range(n_layers))
    else:
        out = (w,) * n_layers
    return () if all(x is None for x in out) else out


def _llama4_chunks(cfg, get, n_layers, src) -> tuple:
    """Llama 4's chunked attention (RoPE layers attend within chunks of attention_chunk_size; every
    no_rope_layer_interval-th layer is global NoPE) as windows of the chunk size, its worst case."""
    c = get("attention_chunk_size", None)
    if c is None:
        return ()
    flags = cfg.get("no_rope_layers")
    if flags is None:
        k = get("no_rope_layer_interval", 4)
        flags = [int((i + 1) % k != 0) for i in range(n_layers)]
    if not isinstance(flags, list) or len(flags) != n_layers or any(f not in (0, 1) for f in flags):
        raise ProfileError(src, "no_rope_layers", f"expected a list of {n_layers} entries of 0 or 1")
    return tuple(c if f else None for f in flags)


# ---- presets ----------------------------------------------------------------------------------
def _presets_dir():
    return resources.files("membound") / "data" / "models"


@functools.lru_cache(maxsize=1)
def _catalogue() -> dict[str, str]:
    return {f.name[:-5]: f.name for f in _presets_dir().iterdir() if f.name.endswith(".yaml")}


def list_models() -> list[str]:
    """Names of the bundled model presets."""
    return sorted(_catalogue())


def load_model_file(path: str | Path) -> Model:
    """Load and validate one preset YAML (fields of Model)."""
    return _validated(read_yaml(path), str(path))


@functools.lru_cache(maxsize=256)
def _load_cached(kind: str, key: str, mtime: float) -> Model:
    if kind == "preset":
        with resources.as_file(_presets_dir() / _catalogue()[key]) as p:
            m = load_model_file(p)
        if m.name != key:
            raise ProfileError(str(p), "name", f"value {m.name!r}: expected {key!r} (the file name)")
        return m
    return load_model_file(key) if kind == "yaml" else Model.from_hf_config(key)


@functools.lru_cache(maxsize=1)
def _index() -> names.NameIndex:
    return names.NameIndex.build("model", (
        names.Entry(key, _load_cached("preset", key, 0.0).aliases, f"membound/data/models/{f}")
        for key, f in _catalogue().items()))


names.register_kind("model", _index)


def load_model(name_or_path_or_model) -> Model:
    """A bundled preset by name (any spelling `membound.catalog.names` resolves: case, spacing and
    punctuation aside, or an alias such as "meta-llama/Llama-3.3-70B-Instruct"), a path to a
    preset YAML or a config.json (or its folder), or a Model passed through. A miss suggests
    the nearest names."""
    if isinstance(name_or_path_or_model, Model):
        return name_or_path_or_model
    hit = _presets_by_name.get(name_or_path_or_model) if isinstance(name_or_path_or_model, str) else None
    if hit is not None:             # a preset already loaded: no file-system work
        return hit
    if not isinstance(name_or_path_or_model, (str, Path)):
        raise InvalidInputError("model", name_or_path_or_model, "a model name, a path, or a Model")
    s = str(name_or_path_or_model)
    p = Path(s)
    if names.names_a_path(s, (".yaml", ".yml", ".json")):
        target = p / "config.json" if p.is_dir() else p
        if not target.is_file():
            raise ProfileError(str(target), "<file>", "no such file")
        kind = "yaml" if s.endswith((".yaml", ".yml")) else "hf"
        return _load_cached(kind, str(target.resolve()), target.stat().st_mtime)
    key = s if s in _catalogue() else _index().resolve(s)
    m = _load_cached("preset", key, 0.0)
    m = _presets_by_name[s] = release_variant(m, s)
    return m


def release_variant(m: Model, text: str) -> Model:
    """The preset as the release `text` names: its own max_context where `text` is one of the
    preset's `variant_contexts` aliases (compared as the resolver does: the whole id, or its
    repository name), else the preset itself."""
    asked = {names.normalise(text), names.normalise(text.rsplit("/", 1)[-1])}
    for alias, context in m.variant_contexts.items():
        if names.normalise(alias) in asked or names.normalise(alias.rsplit("/", 1)[-1]) in asked:
            return m.model_copy(update={"max_context": context})
    return m


_presets_by_name: dict[str, Model] = {}   # name -> preset, the fast path of load_model
