"""A llama.cpp (GGUF) file's output tensor: llama.cpp's quantizer gives it a format of its own
(ggml-org/llama.cpp src/llama-quant.cpp, llama_tensor_get_type_impl): q6_K (210 bytes per 256
weights, 6.5625 bits) in a q4_0 file unless the model is a Falcon or its hidden size is not a
multiple of 256 (then q8_0); a q8_0 file's stays q8_0, f16's f16. Figures derived by hand from the
models' config.json."""
import pytest

import membound as mb
from membound.catalog.dtypes import get_dtype

Q4_0, Q6_K, Q8_0 = 18 / 32, 210 / 256, 34 / 32       # bytes per weight: ggml-common.h block layouts
ONE_TOKEN = dict(batch=1, prompt_tokens=0, output_tokens=1, runtime="ideal", check_memory=False)

# meta-llama/Llama-2-7b: 32 layers, hidden 4096, vocab 32000, untied embeddings, 6,738,415,616 params
P7, V7, H7 = 6_738_415_616, 32000, 4096
# meta-llama/Llama-3.2-1B: 16 layers, hidden 2048, vocab 128256, tied embeddings, 1,235,814,400 params
P1, V1, H1 = 1_235_814_400, 128256, 2048


def _memory_bytes(model, weight_dtype, hw="h100-sxm", **kw):
    """Bytes a decode step of one token at no context streams (the pure roofline's memory term)."""
    hw = mb.load_hardware(hw)
    r = mb.estimate(model, hw, weight_dtype=weight_dtype, **ONE_TOKEN, **kw)
    return r.step_terms_s["memory"] * hw.bandwidth_bytes_s, r


def test_llama_2_7b_q4_0_streams_its_lm_head_in_q6_k():
    assert mb.load_model("llama-2-7b").total_params == P7
    # the layers and norms: 6,738,415,616 - 2 x 131,072,000 = 6,476,271,616 weights in q4_0, one
    # 4096-element row of the (q4_0) input embedding, and the 32000 x 4096 = 131,072,000 LM head in q6_K
    layers = P7 - 2 * V7 * H7
    assert layers == 6_476_271_616
    step = (layers + H7) * Q4_0 + V7 * H7 * Q6_K
    assert step == 3_642_902_784 + 2_304 + 107_520_000 == 3_750_425_088
    got, r = _memory_bytes("llama-2-7b", "q4_0")
    assert got == pytest.approx(step, rel=1e-9)
    # 0.9% more than a pure q4_0 file's 3,716,633,088 bytes (the head at 4.5 bits)
    assert step / ((layers + H7 + V7 * H7) * Q4_0) == pytest.approx(1.00909, abs=1e-5)
    assert mb.bandwidth_ceiling("llama-2-7b", "h100-sxm", "q4_0") == pytest.approx(3.35e12 / step, rel=1e-9)
    # held: the untied input embedding keeps the file's q4_0 (the quantizer changes only output.weight):
    # (6,738,415,616 - 131,072,000) x 18/32 + 131,072,000 x 210/256 = 3,824,150,784 B = 3.5615 GiB, the
    # 3.56 GiB llama-bench reports for Llama-2 7B Q4_0 (reference rows lcpp-*; pure q4_0: 3.53 GiB)
    held = (P7 - V7 * H7) * Q4_0 + V7 * H7 * Q6_K
    assert held == 3_824_150_784
    assert r.memory.weights_bytes == pytest.approx(held, rel=1e-12)
    assert round(held / 2**30, 2) == 3.56 and round(P7 * Q4_0 / 2**30, 2) == 3.53


def test_llama_3_2_1b_q4_0_streams_its_tied_head_in_q6_k():
    assert mb.load_model("llama-3.2-1b").total_params == P1
    # tied: the one 128256 x 2048 = 262,668,288 table is the LM head (q6_K) and no row is looked up apart
    head = V1 * H1
    assert head == 262_668_288
    step = (P1 - head) * Q4_0 + head * Q6_K
    assert step == 547_394_688 + 215_470_080 == 762_864_768
    got, r = _memory_bytes("llama-3.2-1b", "q4_0")
    assert got == pytest.approx(step, rel=1e-9)
    assert r.memory.weights_bytes == pytest.approx(step, rel=1e-12)
    # 9.7% more than a pure q4_0 file's 1,235,814,400 x 18/32 = 695,145,600 bytes; 727.5 MiB against
    # the 729.75 MiB llama-bench reports for Llama-3.2-1B-Instruct-Q4_0.gguf (llama.cpp's
    # docs/backend/snapdragon/README.md; pure q4_0 would be 662.9 MiB)
    assert step / (P1 * Q4_0) == pytest.approx(1.09742, abs=1e-5)
    assert round(step / 2**20, 1) == 727.5
    # the pure bandwidth ceiling streams the same bytes: 3.35e12 / 762,864,768 = 4,391 tok/s on an H100
    assert mb.bandwidth_ceiling("llama-3.2-1b", "h100-sxm", "q4_0") == pytest.approx(3.35e12 / step, rel=1e-9)


def test_q6_k_becomes_q8_0_for_a_falcon_or_a_hidden_size_not_a_multiple_of_256():
    # Falcon-40B (hidden 8192 = 32 x 256, tied, vocab 65024): a Falcon's head is q8_0 whatever its shape
    m = mb.load_model("falcon-40b")
    assert m.model_type == "falcon" and m.hidden_size % 256 == 0 and m.tied_embeddings
    head = 65024 * 8192
    got, _ = _memory_bytes(m, "q4_0", hw="b200")
    assert got == pytest.approx((m.total_params - head) * Q4_0 + head * Q8_0, rel=1e-9)
    # the same architecture without the Falcon name would take q6_K
    plain = m.model_copy(update=dict(model_type=""))
    got, _ = _memory_bytes(plain, "q4_0", hw="b200")
    assert got == pytest.approx((m.total_params - head) * Q4_0 + head * Q6_K, rel=1e-9)
    # Qwen2.5-0.5B: hidden 896 = 3.5 x 256 (tied, vocab 151936): a q6_K row would not be whole super-blocks
    q = mb.load_model("qwen2.5-0.5b")
    assert q.hidden_size == 896 and q.tied_embeddings
    head = 151936 * 896
    got, _ = _memory_bytes(q, "q4_0")
    assert got == pytest.approx((q.total_params - head) * Q4_0 + head * Q8_0, rel=1e-9)


def test_the_config_reader_names_a_falcon():
    cfg = dict(model_type="falcon", hidden_size=8192, num_hidden_layers=60, num_attention_heads=128,
               num_kv_heads=8, new_decoder_architecture=True, vocab_size=65024, parallel_attn=True, bias=False)
    assert mb.Model.from_hf_config(cfg, name="falcon-40b-cfg").model_type == "falcon"


@pytest.mark.parametrize("dtype, bits", [("q8_0", 8.5), ("fp16", 16.0), ("bf16", 16.0)])
def test_q8_0_and_16_bit_files_keep_their_head(dtype, bits):
    # a q8_0 file's output tensor stays q8_0; f16/bf16 files are not quantized: every weight but the
    # 4096 x 32000 input table (one row read) at the file's bits
    got, _ = _memory_bytes("llama-2-7b", dtype)
    assert got == pytest.approx((P7 - V7 * H7 + H7) * bits / 8, rel=1e-9)


def test_an_explicit_head_format_wins():
    # llama-quantize --pure (or --output-tensor-type q4_0): every tensor q4_0, head and embedding included
    q = mb.Quantization("q4_0", head_weights="q4_0")
    hw = mb.load_hardware("h100-sxm")
    r = mb.estimate("llama-2-7b", hw, quantization=q, **ONE_TOKEN)
    assert r.step_terms_s["memory"] * hw.bandwidth_bytes_s == pytest.approx((P7 - V7 * H7 + H7) * Q4_0, rel=1e-9)


def test_gpt_oss_gguf_keeps_its_q8_0_head():
    # ggml-org's gpt-oss files: mxfp4 experts, every other tensor q8_0 (the quantizer's MXFP4_MOE type
    # gives the output tensor q8_0 too): the head is the dense tensors' format
    res = mb.Quantization("mxfp4", dense_weights="q8_0").resolve(mb.load_hardware("h100-sxm"),
                                                                  mb.load_model("gpt-oss-20b"))
    assert (res.head_weights.name, res.embed_weights.name) == ("q8_0", "q8_0")


def test_the_head_format_changes_bytes_not_the_layers_compute_path():
    # the head's own format streams its own bytes; the layers keep their kernel path (not `mixed`), so a
    # runtime's q4_0 mat-vec path still applies (tests/test_runtime_physics.py prices it by hand)
    hw, m = mb.load_hardware("rtx-4090"), mb.load_model("llama-2-7b")
    res = mb.Quantization("q4_0").resolve(hw, m)
    assert (res.weights.name, res.dense_weights.name, res.head_weights.name, res.embed_weights.name) == \
        ("q4_0", "q4_0", "q6_k", "q4_0")
    assert not res.mixed and res.own_head
    # without a model the quantizer's rule cannot be applied: the head is the file type
    assert mb.Quantization("q4_0").resolve(hw).head_weights.name == "q4_0"


def test_k_quant_mixes_count_their_layers_and_the_q6_k_head_apart():
    # Q4_K_M and Q5_K_M give attn_v and ffn_down q6_K in half the layers (llama-quant.cpp use_more_bits:
    # of Llama-2-7B's 32, layers 0-3, 28-31 and 6, 9, ..., 27: 16). A Llama-2-7B layer: q, k, v, o of
    # 4096 x 4096 and gate, up, down of 4096 x 11008
    attn, ffn = 4096 * 4096, 4096 * 11008
    used = 4 + 4 + len(range(6, 28, 3))
    assert used == 16
    share = (attn + ffn) / 2 / (4 * attn + 3 * ffn)                      # 30.93M of 202.38M
    assert share == pytest.approx(0.15285, abs=1e-5)
    q4_k, q5_k, q6_k = 144 * 8 / 256, 176 * 8 / 256, 210 * 8 / 256      # 4.5, 5.5, 6.5625 bits
    assert get_dtype("q4_k_m").bits == pytest.approx(q4_k + share * (q6_k - q4_k), abs=0.01)    # 4.815
    assert get_dtype("q5_k_m").bits == pytest.approx(q5_k + share * (q6_k - q5_k), abs=0.01)    # 5.662
    # the file with its q6_K head: (6,738,415,616 - 131,072,000) x 4.81/8 + 131,072,000 x 6.5625/8
    # = 3,972,665,349 + 107,520,000 B = 3.80 GiB, llama-bench's size for Llama-2 7B Q4_K_M
    _, r = _memory_bytes("llama-2-7b", "q4_k_m")
    held = (P7 - V7 * H7) * 4.81 / 8 + V7 * H7 * Q6_K
    assert r.memory.weights_bytes == pytest.approx(held, rel=1e-12)
    assert round(held / 2**30, 2) == 3.80


def test_a_llama_cpp_draft_model_streams_its_own_q6_k_head():
    # llama-3.1-8b target + llama-3.2-1b draft, both q4_0 files, batch 1, context 0, ideal H100
    # (3.35e12 B/s): a round streams the draft 4 times (762,864,768 B each: its tied head in q6_K, as
    # above) and the target once: its layers and 5 rows of its untied input table (the 5 verified
    # positions) in q4_0, its 128256 x 4096 = 525,336,576-weight head in q6_K; 3.3616 tokens a round
    # (gamma 4, acceptance 0.8: (1 - 0.8^5) / 0.2)
    P8, V8, H8 = 8_030_261_248, 128256, 4096
    assert mb.load_model("llama-3.1-8b").total_params == P8
    draft_step = (P1 - V1 * H1) * Q4_0 + V1 * H1 * Q6_K
    target_step = (P8 - 2 * V8 * H8 + 5 * H8) * Q4_0 + V8 * H8 * Q6_K
    spec = mb.SpeculativeDecoding(draft="llama-3.2-1b", gamma=4, acceptance_rate=0.8)
    r = mb.estimate("llama-3.1-8b", "h100-sxm", weight_dtype="q4_0", speculative=spec, **ONE_TOKEN)
    assert r.decode_tok_s_per_user == pytest.approx(3.3616 / ((4 * draft_step + target_step) / 3.35e12), rel=1e-3)
    # the draft held beside the target: 762,864,768 B (its whole tied table is the q6_K head)
    assert r.memory.other_bytes == pytest.approx(draft_step, rel=1e-12)
