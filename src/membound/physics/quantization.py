"""Quantization as a multiplier: weights, KV cache and activations chosen separately.

- Weights: fewer bits per weight, fewer bytes per step (block scales included, see dtypes).
- KV cache: fewer bytes per cached token, so longer contexts and bigger batches fit and stream faster.
- Activations: the dtype the matrix units compute in; FP8/INT8/FP4 raise the compute peak
  where the device has them (an FP8 tensor core doubles BF16's; an A100 has none).

When `activations` is not given it follows the weights where the device computes in the
weight format (fp8 weights -> fp8 tensor cores, nvfp4/mxfp4 -> fp4 where supported), and is
bf16 otherwise (weight-only formats such as int4 and llama.cpp blocks dequantize to 16 bits).
Weight-only formats pay `dequant_overhead` extra GEMM work (fraction of the 2*params FLOPs),
which only matters once the step is compute-bound — where weight-only int4 stops paying off.
Weights the chip's matrix units multiply as they are beside activations of another format pay
none: MXFP4 beside MXFP8 on Blackwell (kind::mxf8f6f4) or CDNA4 (scaled f8f6f4 MFMA) is one
instruction at the fp8 rate, with no dequantising pass (`Hardware.multiplies`,
`DType.mixed_operand`); on Hopper, which has no fp4, MXFP4 beside bf16 still dequantises. That
takes an engine whose kernels use those instructions (TensorRT-LLM's and FlashInfer's MXFP4 x
MXFP8 MoE GEMMs); llama.cpp's MMQ quantizes activations to int8 blocks and converts every
narrower weight format to int8 in software (MXFP4 through its e2m1 value table, kvalues_mxfp4),
so a runtime with `quantized_activations` resolves with `native_mixed=False` and pays it,
whatever rate its activations stand in at (fp8's where a profile lists no int8 rate).

Mixed checkpoints quantize only some tensors. Three groups may each have a format:
- `weights`: the routed experts, and every other tensor unless given below;
- `dense_weights`: everything that is not a routed expert (attention, dense FFNs, shared experts,
  router, norms, the LM head and the input embedding); default: `weights`
  (`defaults.DENSE_WEIGHT_DTYPE`, None). gpt-oss-120b: Quantization("mxfp4", dense_weights="bf16");
- `head_weights`: the LM head and the input embedding only; default: `dense_weights`
  (NVIDIA's NVFP4 Llama keeps lm_head in bf16: Quantization("nvfp4", head_weights="bf16")),
  except in a llama.cpp file (below).
Each group streams its own bytes. The GEMMs compute in their group's path, resolved by the same
rule as the weights: routed experts in the experts' path, every other GEMM (the LM head
included) and attention in the dense format's path (bf16 attention and projections beside fp4
experts on a Blackwell chip). A format given as `activations` applies to both paths;
`expert_activations` sets the experts' alone, where an engine's MoE kernel computes in a format
of its own: gpt-oss's MXFP4 experts run with MXFP8 activations on Blackwell (W4A8) in
TensorRT-LLM (deployment guide for GPT-OSS, MoE backend support matrix: B200/GB200/B300/GB300,
activation MXFP8, weights MXFP4, backend TRTLLM; H200: BF16 activations, TRITON) and in vLLM with
VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1 (InferenceMAX's gptoss_fp4_b200 recipes), not at the fp4 rate.

A llama.cpp (GGUF) file is not stored in its file type throughout: llama.cpp's quantizer gives the
output tensor (`output.weight`, or `token_embd.weight` where the embeddings are tied) a type of its
own (ggml-org/llama.cpp src/llama-quant.cpp, llama_tensor_get_type_impl): q8_0 for a Falcon or
where the row length n_embd is not a multiple of the k-quants' super-block QK_K = 256 (a q6_K row
is whole super-blocks: its fallback is q8_0), a q8_0 file's stays q8_0, and q6_K for every other
block format of membound's (q4_0, q4_K_M, q5_K_M, q6_K); f16/bf16 files are not quantized. An
untied input embedding keeps the file type. So `Quantization("q4_0").resolve(hw, model)` gives a
q6_K LM head (`gguf_output_format`): Llama-2-7B's 131M-parameter head at 6.5625 instead of 4.5
bits, which llama-bench's 3.56 GiB for its Q4_0 file shows (a pure q4_0 file would be 3.53 GiB).
An explicit `head_weights` wins (llama-quantize --output-tensor-type, or --pure). The head's
GEMM stays on the dense tensors' compute path: llama.cpp runs q6_K and q8_0 through the same
quantized mat-vec and GEMM kernels (int8 activations) as the file type.

The residual stream (the hidden state between layers) is what a step's collectives move (the
tensor-parallel all-reduce, pipeline hops, the expert all-to-all) and its activation buffers
hold: `Resolved.residual_bytes` per element, decided once here for every caller (`estimate`,
`serve`, the planner, sweeps). On GPUs and every chip an engine schedules it is 16-bit
(`RESIDUAL_BYTES`) whatever the GEMMs compute in: an fp8/int8 GEMM quantizes its input inside
the kernel and writes the model's 16-bit dtype (vLLM `w8a8_utils.apply_fp8_linear` and
`apply_int8_linear`: `out_dtype=input.dtype`; SGLang's block-fp8 GEMMs in
`layers/quantization/fp8_utils.py` likewise), and the row-parallel layer all-reduces that output
(`linear.RowParallelLinear.forward`); TensorRT-LLM moves it in fp8 only behind its opt-in PCIe
"Low-Precision-AllReduce", which quantizes FP16/BF16 data to FP8 for the transfer
(nvidia.github.io/TensorRT-LLM/legacy/advanced/lowprecision-pcie-allreduce.html). A dataflow chip
(`hardware.DATAFLOW_KINDS`) streams it in the format it computes in: Groq's compiler stores
activations in FP8 where error-tolerant (groq.com/blog/inside-the-lpu-deconstructing-groq-speed,
TruePoint numerics); Cerebras' wafer and SambaNova's RDU compute only in 16 bits, so theirs is
16-bit. 32-bit compute (CPUs without bf16) is counted at 16 bits, as before.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

from ..catalog.dtypes import DType, get_dtype
from ..errors import InvalidInputError, MemboundError, is_finite_number
from ..catalog.hardware import DATAFLOW_KINDS, Hardware, load_hardware
from ..catalog.model import Model, load_model

QK_K = 256   # weights per k-quant super-block (ggml-common.h): a q6_K row is whole super-blocks
GGUF_OUTPUT = {"q4_0": "q6_k", "q4_k_m": "q6_k", "q5_k_m": "q6_k", "q6_k": "q6_k", "q8_0": "q8_0"}
"""The output tensor's format llama.cpp's quantizer gives a file of each block type (module
docstring), where the model is no Falcon and its hidden size a multiple of QK_K."""
RESIDUAL_BYTES = 2.0   # bf16/fp16: the residual stream an engine keeps and all-reduces (module docstring)
# The extra GEMM work of a weight-only format, as a share of its 2 x params FLOPs, where the chip's matrix
# units cannot multiply the weights as they are: a compute-bound W4A16 GEMM runs at 1 / (1 + this) of the
# 16-bit GEMM's rate. Measured: MARLIN, the FP16 x INT4 kernel vLLM, SGLang and TGI run for GPTQ/AWQ
# weights, keeps its ideal speed-up to batch 16-32 and at batch >= 1024 (compute-bound) runs about 10%
# below the FP16 GEMM on an A10 (Frantar et al., 'MARLIN: Mixed-Precision Auto-Regressive Parallel
# Inference on Large Language Models', PPoPP 2025, arXiv 2408.11743, GEMM benchmarks over batch
# 1-65k; the ~10% read from the summary at wentao.site/marlin_summary, the paper's figure not checked
# here): 1 / 0.9 - 1 = 1/9. It is one figure for every chip, where the dequantisation's share in truth
# scales with the chip's matrix-to-vector rate ratio over the tile's token rows; on a fitted runtime it
# trades against the fitted compute_fraction.
DEFAULT_DEQUANT_OVERHEAD = 1.0 / 0.9 - 1.0
# The chip that figure was measured on: an A10's matrix-to-vector ratio, its dense fp16 tensor rate over its fp32
# ALU rate, 125 / 31.24 TFLOP/s (NVIDIA A10 datasheet; hardware_profiles/a10.yaml). `upcast_rate` scales the
# dequantisation's share by a chip's ratio over this one.
DEQUANT_MEASURED_RATIO = 1.25e14 / 3.124e13


def upcast_rate(hw: Hardware, res: Resolved) -> float:
    """The rate of a compute-bound expert GEMM whose kernel upcasts weight-only experts to the 16-bit
    activations inside its main loop, relative to the rate the fixed share `res.dequant` gives it:
    (1 + d) / (1 + d r / r_A10), r = the chip's matrix rate in the activations' format over its fp32
    ALU rate. The upcast (unpack, scale, convert) is ALU work per weight element per tile of token rows,
    in series with the tile's multiply-accumulates on the matrix units (as `core.on_matrix_units`
    counts a GEMM's other work); a compute-bound tile's rows are full, so its share of the GEMM's time
    is the measured share d (MARLIN on an A10, `DEFAULT_DEQUANT_OVERHEAD`) scaled by how much faster the
    matrix units are than the ALUs: H200 989 / 67 TFLOP/s = 14.8 against the A10's 4.0 gives
    1.111 / 1.411 = 0.79; MI300X 1307 / 163 = 8.0 gives 0.91. 1 where the experts do not upcast
    (d = 0: fp8 or fp4 experts, MXFP4 beside MXFP8 on Blackwell) or the profile gives no fp32 rate."""
    fp32 = hw.compute_flops.get("fp32", 0.0)
    if res.dequant == 0.0 or fp32 <= 0.0 or res.activations.bits < 16:
        return 1.0
    return (1.0 + res.dequant) / (1.0 + res.dequant * res.peak_flops / fp32 / DEQUANT_MEASURED_RATIO)


@dataclass(frozen=True)
class Quantization:
    """Formats for weights, KV cache and activations (names from the dtype registry)."""

    weights: str = "bf16"
    kv: str | None = None            # default: bf16 (fp16 stands in)
    activations: str | None = None   # default: see module docstring
    dequant_overhead: float | None = None
    dense_weights: str | None = None  # the non-expert tensors; None: as `weights` (module docstring)
    head_weights: str | None = None   # the LM head and input embedding; None: as `dense_weights`
    expert_activations: str | None = None   # the routed experts' compute format; None: `activations`

    def __post_init__(self):
        for name, value in (("weight_dtype", self.weights), ("dense_weight_dtype", self.dense_weights),
                            ("head_weight_dtype", self.head_weights)):
            if value is not None or name == "weight_dtype":
                _format(name, value, "a registered weight format")
        if self.kv is not None:
            _format("kv_dtype", self.kv, "a registered KV-cache format")
        for name, value in (("activation_dtype", self.activations), ("expert_activation_dtype", self.expert_activations)):
            if value is not None and _format(name, value, "a registered format").compute is None:
                raise InvalidInputError(name, value, "a format tensor cores compute in (bf16, fp16, fp8, int8, fp4)")
        d = self.dequant_overhead
        if d is not None and not (isinstance(d, (int, float)) and is_finite_number(d) and d >= 0):
            raise InvalidInputError("dequant_overhead", d, "a finite fraction >= 0")

    def resolve(self, hw: Hardware | str, model: Model | str | None = None, *, native_mixed: bool = True) -> Resolved:
        """Bytes and compute peaks on device `hw`; with the `model`, a llama.cpp file's own output
        tensor format (module docstring). Either may be given by name. `native_mixed`: the engine's
        GEMMs multiply weights as they are beside activations of another format where the chip's
        matrix units can (module docstring); False for an engine that converts every narrower weight
        format to its activations' in software (llama.cpp's int8 MMQ: `Runtime.quantized_activations`)."""
        hw = load_hardware(hw)
        model = None if model is None else load_model(model)
        w = get_dtype(self.weights)
        kv = get_dtype(self.kv or "bf16")
        act_asked = get_dtype(self.activations) if self.activations is not None else None
        exp_asked = get_dtype(self.expert_activations) if self.expert_activations is not None else act_asked
        bf16, fp32 = get_dtype("bf16"), get_dtype("fp32")
        act, peak, attn_peak = _compute_dtypes(w, kv, exp_asked, hw, bf16, fp32)
        dq = self.dequant_overhead if self.dequant_overhead is not None else DEFAULT_DEQUANT_OVERHEAD
        dense = w if self.dense_weights is None else get_dtype(self.dense_weights)
        if self.head_weights is not None:
            head = embed = get_dtype(self.head_weights)
        else:
            head, embed = gguf_output_format(dense, model) or dense, dense
        if dense == w and exp_asked is act_asked:
            d_act, d_peak = act, peak
        else:       # the dense GEMMs and attention compute in the dense format's own path
            d_act, d_peak, attn_peak = _compute_dtypes(dense, kv, act_asked, hw, bf16, fp32)
        native = hw if native_mixed else None
        return Resolved(w, kv, act, peak, _dequant(w, act, dq, native), attn_peak, dense, head, d_act, d_peak,
                        _dequant(dense, d_act, dq, native), _residual_bytes(act, hw.kind), embed)


def _format(field: str, value, expected: str) -> DType:
    """The registered format `value` names, or an error naming the `field` it was given as."""
    try:
        return get_dtype(value)
    except MemboundError as e:
        raise InvalidInputError(field, value, f"{expected} ({e})") from None


def gguf_output_format(dense: DType | str, model: Model | None = None) -> DType | None:
    """The format llama.cpp's quantizer gives the output tensor of a file whose tensors are
    `dense` (module docstring): q8_0 for a Falcon (`Model.model_type` "falcon") or a hidden size
    that is not a multiple of QK_K, else GGUF_OUTPUT's; None where `dense` is no llama.cpp block
    format of GGUF_OUTPUT (bf16, fp16: not quantized) or no model is given."""
    dense = get_dtype(dense)
    out = GGUF_OUTPUT.get(dense.name)
    if out is None or model is None:
        return None
    if model.model_type == "falcon" or model.hidden_size % QK_K:
        out = "q8_0"
    return get_dtype(out)


def _residual_bytes(act: DType, kind: str) -> float:
    """Bytes per element of the residual stream on a chip of this kind (module docstring): 16-bit
    where an engine keeps it, the activations' own format (at most 16 bits) on a dataflow chip."""
    if kind in DATAFLOW_KINDS and act.bits <= 16:
        return act.bytes
    return RESIDUAL_BYTES


def _dequant(w: DType, act: DType, overhead: float, hw: Hardware | None) -> float:
    """Extra GEMM work of a weight-only format (dequantised to the activations'), else 0. Weights
    the chip `hw`'s matrix units multiply as they are beside the activations' format pay none
    (MXFP4 experts beside MXFP8 activations on Blackwell: `Hardware.multiplies`,
    `DType.mixed_operand`); `hw` None: an engine that converts them whatever the chip can."""
    if w.compute is None:
        return overhead
    if w.compute == act.compute or w.bits >= act.bits:
        return 0.0
    native = hw is not None and act.compute is not None and w.mixed_operand and hw.multiplies(w.compute, act.compute)
    return 0.0 if native else overhead


@functools.lru_cache(maxsize=4096)
def _compute_dtypes(w: DType, kv: DType, act_asked: DType | None, hw, bf16: DType, fp32: DType) -> tuple:
    """(activation dtype, its peak FLOP/s, attention's peak FLOP/s) for these formats on `hw`.
    Attention (QK^T, AV) computes in the KV's format: fp8 where the KV is fp8, the activations
    are 8-bit or less and the chip has fp8; else 16-bit (never fp4, whatever the weights).
    bf16 and fp32 are passed in (not looked up here) so a replaced format is never served stale."""
    if act_asked is not None:
        act = act_asked
        peak = hw.peak_flops(act.compute)           # raises if the device lacks it
    else:
        act = w if (w.compute in ("fp8", "fp4", "int8") and hw.supports(w.compute)) else bf16
        if not hw.supports(act.compute):
            act = fp32 if hw.supports("fp32") else act
        peak = hw.peak_flops(act.compute)
    attn = "fp8" if kv.compute == "fp8" and act.bits <= 8 and hw.supports("fp8") else "bf16"
    return act, peak, hw.peak_flops(attn) if hw.supports(attn) else peak


@dataclass(frozen=True)
class Resolved:
    """Formats and compute peaks on one device: the experts' path (weights, activations,
    peak_flops, dequant) and the dense tensors' (dense_*; the same objects when not mixed)."""

    weights: DType
    kv: DType
    activations: DType
    peak_flops: float
    dequant: float
    attn_peak_flops: float
    dense_weights: DType
    head_weights: DType
    dense_activations: DType
    dense_peak_flops: float
    dense_dequant: float
    residual_bytes: float   # per element of the hidden state between layers (module docstring)
    embed_weights: DType    # an untied input embedding: the head's where given, else the dense tensors'

    @property
    def mixed(self) -> bool:
        """Whether the tensors that are not routed experts have a format (and so a compute path) of
        their own. An LM head and embedding of their own format only stream their own bytes
        (`own_head`): their GEMM runs on the dense tensors' path."""
        return self.dense_weights != self.weights

    @property
    def own_head(self) -> bool:
        """Whether the LM head or the input embedding is stored apart from the dense tensors."""
        return self.head_weights != self.dense_weights or self.embed_weights != self.dense_weights
