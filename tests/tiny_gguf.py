"""A tiny random-weight Llama model as a GGUF file llama.cpp can load (written with the `gguf`
package; nothing is downloaded), and the membound Model describing the same shapes.

Minimal metadata llama.cpp needs for a llama-arch model with an SPM ('llama') tokenizer:
general.architecture, llama.{context_length, embedding_length, block_count,
feed_forward_length, attention.head_count, attention.head_count_kv,
attention.layer_norm_rms_epsilon, rope.dimension_count}, tokenizer.ggml.{model, tokens,
scores, token_type, bos/eos/unknown_token_id}. The vocabulary must hold the 256 byte tokens
<0x00>..<0xFF> (SPM byte fallback; llama.cpp looks up <0x0A> for the newline).
"""
from __future__ import annotations

import string

import numpy as np

N_LAYERS, HIDDEN, N_HEADS, N_KV_HEADS, FFN, CONTEXT = 2, 64, 4, 2, 128, 8192
HEAD_DIM = HIDDEN // N_HEADS


def vocabulary() -> tuple[list[str], list[float], list[int]]:
    """(tokens, scores, types): <unk> <s> </s>, 256 byte tokens, then '▁', letters, digits
    and '▁'+letter pieces. Types: 1 normal, 2 unknown, 3 control, 6 byte."""
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    types = [2, 3, 3] + [6] * 256
    pieces = ["▁"] + list(string.ascii_letters + string.digits + ".,:;()=_") + [f"▁{c}" for c in string.ascii_lowercase]
    tokens += pieces
    types += [1] * len(pieces)
    scores = [0.0] * 259 + [-float(i) for i in range(len(pieces))]
    return tokens, scores, types


def printable_ids(tokens: list[str]) -> list[int]:
    """Tokens the model may emit: the pieces and the printable ASCII byte tokens."""
    ok = []
    for i, t in enumerate(tokens):
        if t.startswith("<0x") and 0x20 <= int(t[3:5], 16) <= 0x7E:
            ok.append(i)
        elif not t.startswith("<"):
            ok.append(i)
    return ok


def write_tiny_llama(path, seed: int = 0) -> int:
    """Write the GGUF (f32 weights) to `path`; returns the vocabulary size."""
    import gguf
    rng = np.random.default_rng(seed)
    tokens, scores, types = vocabulary()
    V = len(tokens)
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("tiny-llama-test")
    w.add_context_length(CONTEXT)
    w.add_embedding_length(HIDDEN)
    w.add_block_count(N_LAYERS)
    w.add_feed_forward_length(FFN)
    w.add_head_count(N_HEADS)
    w.add_head_count_kv(N_KV_HEADS)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_dimension_count(HEAD_DIM)
    w.add_file_type(0)   # all f32
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)

    def t(name, *shape, scale=0.05):   # numpy (rows, cols) = ggml {cols, rows}
        w.add_tensor(name, (rng.standard_normal(shape) * scale).astype(np.float32))

    t("token_embd.weight", V, HIDDEN, scale=1.0)
    w.add_tensor("output_norm.weight", np.ones(HIDDEN, dtype=np.float32))
    # output rows ~ N(0, 1): logits spread with std sqrt(64) = 8 after the RMS norm; the rows of
    # the special, control and non-ASCII byte tokens are zero, so their logit 0 is far below
    # the best printable token's and the model never stops early nor emits broken UTF-8.
    out = np.zeros((V, HIDDEN), dtype=np.float32)
    ids = printable_ids(tokens)
    out[ids] = rng.standard_normal((len(ids), HIDDEN)).astype(np.float32)
    w.add_tensor("output.weight", out)
    for i in range(N_LAYERS):
        w.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(HIDDEN, dtype=np.float32))
        t(f"blk.{i}.attn_q.weight", N_HEADS * HEAD_DIM, HIDDEN)
        t(f"blk.{i}.attn_k.weight", N_KV_HEADS * HEAD_DIM, HIDDEN)
        t(f"blk.{i}.attn_v.weight", N_KV_HEADS * HEAD_DIM, HIDDEN)
        t(f"blk.{i}.attn_output.weight", HIDDEN, N_HEADS * HEAD_DIM)
        w.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(HIDDEN, dtype=np.float32))
        t(f"blk.{i}.ffn_gate.weight", FFN, HIDDEN)
        t(f"blk.{i}.ffn_up.weight", FFN, HIDDEN)
        t(f"blk.{i}.ffn_down.weight", HIDDEN, FFN)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return V


def membound_model_yaml(path, vocab: int) -> None:
    """The same shapes as a membound model preset file (fields of mb.Model)."""
    path.write_text(
        "name: tiny-llama-test\n"
        f"n_layers: {N_LAYERS}\nhidden_size: {HIDDEN}\nn_heads: {N_HEADS}\nn_kv_heads: {N_KV_HEADS}\n"
        f"head_dim: {HEAD_DIM}\nffn_size: {FFN}\nvocab_size: {vocab}\nmax_context: {CONTEXT}\n"
        "source: tests/tiny_gguf.py (random weights, written by the test)\n")
