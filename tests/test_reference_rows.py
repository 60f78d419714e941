"""How reference rows become scenarios: each bug found in the mapping has a hand-derived test."""
import csv

import pytest

import membound as mb
from membound.fidelity.reference import reference_dir
from membound.physics.efficiency import efficiency

FIELDS = ["id", "source_title", "source_url_or_repo_path", "hardware", "n_chips", "model", "params_b",
          "weight_dtype", "kv_dtype", "batch_or_concurrency", "prompt_tokens", "output_tokens", "metric",
          "value", "framework", "notes"]


def _ref(tmp_path, *rows):
    with open(reference_dir() / "measurements.csv", newline="") as f:
        assert csv.DictReader(f).fieldnames == FIELDS      # the shipped schema
    path = tmp_path / "rows.csv"
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, FIELDS)
        w.writeheader()
        for r in rows:
            w.writerow({k: "" for k in FIELDS} | {"n_chips": "1", "model": "LLaMA-2 7B", "weight_dtype": "q4_0",
                                                   "kv_dtype": "f16", "batch_or_concurrency": "1"} | r)
    return mb.fidelity.load_reference(path)


def test_tg_at_depth_counts_the_context_once(tmp_path):
    # llama-bench "tg32 @ d4096": the prompt column holds the depth itself (sources.md). The step
    # sees 4096..4127 cached tokens, not 8192.. (the depth added to the prompt again).
    ref = _ref(tmp_path, dict(id="x-1", hardware="NVIDIA RTX 4090", prompt_tokens="4096", output_tokens="32",
                              metric="decode_tok_s_per_user", value="150", framework="llama.cpp (CUDA)",
                              notes="llama-bench tg32 @ d4096"))
    [sc] = ref.scenarios
    assert (sc.prompt_tokens, sc.depth, sc.output_tokens) == (0, 4096, 32)
    # by hand, pure roofline on the 4090 (1008 GB/s): weights (6.738e9 params less the 32000 x 4096
    # input table, one row read) x 4.5/8 B, the 32000 x 4096 LM head at q6_K's 6.5625 bits (llama.cpp's
    # quantizer: quantization.py), plus 2*32*4096*2 = 524,288 B of f16 KV per cached token
    m = mb.load_model("llama-2-7b")
    w = (m.total_params - 32000 * 4096 + 4096) * 4.5 / 8 + 32000 * 4096 * (6.5625 - 4.5) / 8
    steps = [(w + 524_288 * L) / 1008e9 for L in range(4096, 4096 + 32)]
    assert mb.fidelity.predict(sc, runtime="ideal") == pytest.approx(32 / sum(steps), rel=1e-6)


def test_hip_and_rocm_rows_are_their_own_runtime(tmp_path):
    ref = _ref(tmp_path, *[dict(id=f"x-{i}", hardware="AMD RX 9070 XT", prompt_tokens="0", output_tokens="128",
                                metric="decode_tok_s_per_user", value="100", framework=f"llama.cpp ({fw})")
                           for i, fw in enumerate(["ROCm", "HIP", "Vulkan"])])
    got = [(s.runtime, s.category) for s in ref.scenarios]
    assert got == [("llama.cpp-hip", "llama.cpp HIP decode"), ("llama.cpp-hip", "llama.cpp HIP decode"),
                   ("llama.cpp-vulkan", "llama.cpp Vulkan decode")]


def test_a_cpu_backend_row_runs_on_the_cpu_cores_not_the_igpu(tmp_path):
    ref = _ref(tmp_path, dict(id="x-1", hardware="AMD Ryzen AI Max+ 395 (Strix Halo)", prompt_tokens="0",
                              output_tokens="1", metric="decode_tok_s_per_user", value="20",
                              framework="llama.cpp (CPU)"))
    [sc] = ref.scenarios
    assert (sc.hardware, sc.runtime, sc.category) == ("ryzen-ai-max-395-cpu", "llama.cpp-cpu", "llama.cpp CPU decode")
    # one token, no context, the CPU profile's own fractions (no CPU rows to fit): bandwidth 0.396 x 256 GB/s
    # (likwid-bench copy on all cores, 101.48 GB/s, cited in the profile),
    # plus its 2 us x 32 layers floor only where it is larger than the stream (it is not); q4_0 weights,
    # the 32000 x 4096 LM head q6_K (llama.cpp's quantizer: quantization.py)
    m = mb.load_model("llama-2-7b")
    w = (m.total_params - 32000 * 4096 + 4096) * 4.5 / 8 + 32000 * 4096 * (6.5625 - 4.5) / 8
    assert mb.fidelity.predict(sc) == pytest.approx(0.396 * 256e9 / w, rel=1e-6)


def test_block_quantized_gemm_peak_never_exceeds_the_int8_peak():
    # llama.cpp's MMQ peak is 4 x fp32: RTX 4090 4 x 82.6 = 330.4 TFLOP/s (int8 tensor peak 660.6 above it);
    # RX 7900 XTX 4 x 61.4 = 245.6 > its int8 WMMA peak 122.8, so 122.8
    rt = mb.load_runtime("llama.cpp")
    for name, fp32, int8, expected in (("rtx-4090", 82.6e12, 660.6e12, 330.4e12),
                                       ("rx-7900-xtx", 61.4e12, 122.8e12, 122.8e12)):
        hw = mb.load_hardware(name)
        assert (hw.compute_flops["fp32"], hw.compute_flops["int8"]) == (fp32, int8)
        assert efficiency(rt, hw).quantized_peak_flops == pytest.approx(expected)


def test_llama_cpp_picks_each_devices_native_backend():
    rt = mb.load_runtime("llama.cpp")
    assert [rt.backend_for(mb.load_hardware(h)).name for h in
            ("apple-m4-max", "rtx-4090", "rx-7900-xtx", "arc-a770", "ryzen-ai-max-395-cpu")] == \
        ["llama.cpp-metal", "llama.cpp-cuda", "llama.cpp-hip", "llama.cpp-vulkan", "llama.cpp-cpu"]
    with pytest.raises(mb.InvalidInputError, match="backend"):
        mb.estimate("llama-3.1-8b", "cerebras-wse-3", runtime="llama.cpp")


def test_every_specialised_layout_passes_estimates_own_memory_check():
    # validation predicts no layout that estimate() would refuse (Groq rows once did)
    for sc in mb.fidelity.load_reference().scenarios:
        if sc.hardware in ("cerebras-wse-3", "groq-lpu", "sambanova-sn40l"):
            tp, pp, ep = sc.parallel
            mb.estimate(sc.model, sc.hardware, prompt_tokens=sc.prompt_tokens, output_tokens=sc.output_tokens,
                        weight_dtype=sc.weight_dtype, n_chips=sc.n_chips, parallel=mb.Parallel(tp=tp, pp=pp, ep=ep))


def test_prefill_at_depth_combines_memory_and_compute_as_the_runtime_does():
    # "pp512 @ d2048": the FLOPs of positions 2048..2559 (one LM head, for the last) and the bytes
    # of 512 new tokens and the 2048 cached tokens' KV their attention reads (2 x 32 layers x 4096 x
    # 2 B = 524,288 B a token at 0.8 x 1.008e12 B/s). A runtime whose kernels do not overlap loads and
    # math (overlap 0) adds the two; overlap 1 takes the larger; the per-layer overhead (32 layers x
    # 10 us) is added once to either
    from membound.fidelity.reference import Scenario, predict
    from membound.catalog.runtime import Runtime, RuntimeEntry
    sc = Scenario(id="x", category="c", metric="prefill_tok_s", measured=1.0, model="llama-2-7b",
                  hardware="rtx-4090", runtime="t", weight_dtype="q4_0", prompt_tokens=512, output_tokens=0,
                  depth=2048)

    def rt(overlap):
        return Runtime(name="t", use_latency_floor=False, classes={"default": RuntimeEntry(
            bandwidth_fraction=0.8, compute_fraction=0.5, per_layer_overhead_s=1e-5, overlap=overlap)})
    from membound.fidelity.reference import _run
    full, old, new = (_run(sc, rt(1.0), 1, S, 1)[1] for S in (2560, 2048, 512))
    # both passes run one LM head, so their difference lacks the new tokens' one: 32,000 x 4,096 of
    # the 6,738,415,616 - 131,072,000 (untied lookup) params one decode token multiplies, at the same
    # GEMM rate as that token (decode at context 0: no attention)
    one = _run(sc, rt(1.0), 1, 0, 1)[1]["compute_s"]
    head = one * 32000 * 4096 / (6_738_415_616 - 32000 * 4096)
    c = full["prefill_compute_s"] - old["prefill_compute_s"] + head
    m = new["prefill_memory_s"] + 2048 * 524_288 / (0.8 * 1.008e12)
    assert 0 < m < c
    over = 32 * 1e-5
    assert predict(sc, runtime=rt(0.0)) == pytest.approx(512 / (m + c + over), rel=1e-9)
    assert predict(sc, runtime=rt(1.0)) == pytest.approx(512 / (c + over), rel=1e-9)


def test_a_prefill_after_cached_tokens_reads_their_kv_as_often_as_the_runtime_passes_over_it():
    # a 32-token question after 1024 cached tokens, LLaMA-2-7B fp16 on an RTX 4090 (1.008e12 B/s at
    # bandwidth_fraction 1): its attention reads the cached tokens' KV, 2 x 32 layers x 4096 x 2 B =
    # 524,288 B a token, 536,870,912 B for 1024 of them: 536,870,912 / 1.008e12 = 0.53261 ms more
    # than the same question with nothing cached, while the weights (13.2 GB) outweigh the FLOPs.
    # TinyChat's chunk prefill copies the cache before FlashAttention reads it (3 passes): 2 x that more
    from dataclasses import replace

    from membound.fidelity.reference import Scenario, predict
    from membound.catalog.runtime import Runtime, RuntimeEntry
    sc = Scenario(id="x", category="c", metric="ttft_ms", measured=1.0, model="llama-2-7b", hardware="rtx-4090",
                  runtime="t", weight_dtype="fp16", prompt_tokens=32, output_tokens=1, depth=1024)

    def rt(passes):
        return Runtime(name="t", use_latency_floor=False, use_device_fractions=False, cached_kv_passes=passes,
                       classes={"default": RuntimeEntry(bandwidth_fraction=1.0, compute_fraction=1.0)})
    one, three = predict(sc, runtime=rt(1)), predict(sc, runtime=rt(3))
    fresh = predict(replace(sc, depth=0), runtime=rt(1))
    assert one - fresh == pytest.approx(1e3 * 536_870_912 / 1.008e12, rel=1e-6)
    assert three - one == pytest.approx(2e3 * 536_870_912 / 1.008e12, rel=1e-6)


@pytest.mark.parametrize("notes, n, layout", [
    ("TP1,PP8; 'Total Output Throughput'", 8, (1, 8, 1)),   # TensorRT-LLM's RTX PRO 6000 rows
    ("TP4; uniform synthetic ISL/OSL", 4, (4, 1, 1)),
    ("NeMo, TP=2 PP=1", 2, (2, 1, 1)),
    ("PP4 only", 8, (2, 4, 1)),            # the tensor degree is what the 8 chips leave: 8 / 4
    ("TP3 on 8 chips", 8, (8, 1, 1)),      # 3 x 1 != 8: not a layout of these chips
    ("no layout stated", 4, (4, 1, 1)),
])
def test_a_layout_stated_in_the_notes_is_the_rows_layout(tmp_path, notes, n, layout):
    # before, every row ran tensor-parallel over all its chips: "TP1,PP8" became tp=8
    ref = _ref(tmp_path, dict(id="x-1", hardware="NVIDIA H100 SXM", n_chips=str(n), model="Llama-3.1-8B",
                              weight_dtype="bf16", prompt_tokens="128", output_tokens="128",
                              metric="decode_tok_s_per_user", value="100",
                              framework="TensorRT-LLM (PyTorch backend, trtllm-bench)", notes=notes))
    assert not ref.skipped, ref.skipped
    [sc] = ref.scenarios
    assert sc.parallel == layout and sc.n_chips == n


def test_outside_spellings_of_formats_devices_engines_and_fine_tunes_are_predicted(tmp_path):
    # rows as other people's benchmark tables write them: a K-quant GGUF, an Apple chip without its
    # core count, an engine by its own name, a fine-tune by its Hugging Face name (a quantized upload's
    # too: the row's weight format says what it is). Each was skipped
    # ("weight format 'Q4_K_M' unknown", "no bundled profile matches 'Apple M4 Max'", "runtime
    # 'vLLM' not modelled", "no preset for model"); each is now the same scenario as its plain spelling
    rows = [dict(id="k-1", hardware="NVIDIA RTX 4090", model="Llama-3.1-8B-Instruct", weight_dtype="Q4_K_M",
                 output_tokens="128", metric="decode_tok_s_per_user", value="150", framework="llama.cpp (CUDA)"),
            dict(id="k-2", hardware="Apple M4 Max", model="Llama-2-7b-chat-hf", weight_dtype="Q8_0",
                 output_tokens="128", metric="decode_tok_s_per_user", value="60", framework="Ollama"),
            dict(id="k-3", hardware="NVIDIA H100 SXM 80GB", model="meta-llama/Llama-3.1-8B-Instruct-FP8",
                 weight_dtype="fp8", kv_dtype="bf16", prompt_tokens="1024", output_tokens="128",
                 metric="decode_tok_s_per_user", value="150", framework="vLLM 0.6.3")]
    ref = _ref(tmp_path, *rows)
    assert not ref.skipped, ref.skipped
    got = {s.id: (s.model, s.hardware, s.weight_dtype, s.runtime) for s in ref.scenarios}
    assert got == {"k-1": ("llama-3.1-8b", "rtx-4090", "q4_k_m", "llama.cpp-cuda"),
                   "k-2": ("llama-2-7b", "apple-m4-max", "q8_0", "llama.cpp-metal"),   # Ollama runs llama.cpp
                   "k-3": ("llama-3.1-8b", "h100-sxm", "fp8", "vllm")}
    # the K-quant row is priced as estimate() prices the format: tg128 = 1 / the mean step
    s = ref.scenarios[0]
    r = mb.estimate("llama-3.1-8b", "rtx-4090", weight_dtype="q4_k_m", kv_dtype="fp16", prompt_tokens=0,
                    output_tokens=128, runtime="llama.cpp-cuda", activation_dtype="int8")
    assert mb.fidelity.predict(s) == pytest.approx(r.decode_tok_s_per_user, rel=1e-12)


def test_a_llama_cpp_row_on_a_chip_it_has_no_backend_for_is_skipped_not_priced_as_cuda(tmp_path):
    # llama.cpp names no backend for a Google TPU: the row was priced with CUDA's figures
    ref = _ref(tmp_path, dict(id="t-1", hardware="Google TPU v5e", output_tokens="128",
                              metric="decode_tok_s_per_user", value="100", framework="llama.cpp"))
    assert not ref.scenarios and "no backend" in ref.skipped[0][2]


def test_other_spellings_of_a_metric_are_converted_and_unknown_ones_skipped_by_name(tmp_path):
    # tpot_ms is itl_ms; ttft_s is ttft_ms / 1000 (0.05 s -> 50 ms); an e2e latency has no
    # prediction: it is skipped naming the metrics a row may give (it was "prediction failed")
    base = dict(hardware="NVIDIA RTX 4090", model="Llama-3.1-8B", weight_dtype="Q4_K_M",
                framework="llama.cpp (CUDA)")
    ref = _ref(tmp_path, dict(base, id="a-1", output_tokens="128", metric="tpot_ms", value="6.5"),
               dict(base, id="a-2", prompt_tokens="512", metric="ttft_s", value="0.05"),
               dict(base, id="a-3", prompt_tokens="512", output_tokens="128", metric="e2e_latency_s", value="1.2"))
    got = {s.id: (s.metric, s.measured, s.category) for s in ref.scenarios}
    assert got == {"a-1": ("itl_ms", 6.5, "llama.cpp CUDA decode"),
                   "a-2": ("ttft_ms", 50.0, "llama.cpp CUDA prefill")}      # a TTFT row is a prefill row
    [(rid, metric, why)] = ref.skipped
    assert (rid, metric) == ("a-3", "e2e_latency_s") and "itl_ms" in why and "tpot_ms" in why


def test_an_awq_w4a16_rows_lm_head_streams_in_fp16(tmp_path):
    # llm-awq quantizes only the linears inside the decoder blocks (real_quantize_model_weight): the
    # LM head stays fp16. Llama-3-8B on an RTX 4090 at one token (pure roofline, no KV at context 0):
    # its 128256 x 4096 = 525,336,576-param head and one row of its untied input table (4096) at 2 B,
    # the other 8,030,261,248 - 2 x 525,336,576 = 6,979,588,096 params at int4's 4.125 bits:
    # 6,979,588,096 x 4.125 / 8 + 525,340,672 x 2 = 3,598,849,112 + 1,050,681,344 = 4,649,530,456 B,
    # 4.61263e-3 s at 1.008e12 B/s (int4 head too: 3,869,730,730 B, 0.78 GB less)
    ref = _ref(tmp_path, dict(id="awq-x", hardware="NVIDIA RTX 4090 24GB", model="LLaMA-3-8B",
                              weight_dtype="int4 (AWQ W4A16, g128)", metric="itl_ms", value="6.66",
                              framework="TinyChat (AWQ W4A16 kernels)", notes="per-token latency"))
    [sc] = ref.scenarios
    assert (sc.weight_dtype, sc.head_dtype) == ("int4", "fp16")
    m = mb.load_model("llama-3-8b")
    assert (m.total_params, m.vocab_size, m.hidden_size, m.tied_embeddings) == (8030261248, 128256, 4096, False)
    step = 4_649_530_456 / 1.008e12
    from dataclasses import replace
    ideal_one = replace(sc, prompt_tokens=0, output_tokens=1)
    assert mb.fidelity.predict(ideal_one, runtime="ideal") == pytest.approx(1e3 * step, rel=1e-6)


def test_tinychats_falcon_rows_are_group_64(tmp_path):
    # TinyChat's README quantizes Falcon-7B with q_group_size 64 (4544 = 35.5 x 128): 4 + 16/64 = 4.25
    # bits a weight. Falcon-7B: 32 layers of 4544 x 4672 (fused QKV) + 4544^2 + 2 x 4544 x 18176 + 2 x 4544
    # (LayerNorm) = 207,070,080 params, the final norm's 4544 and the tied 65024 x 4544 = 295,469,056-param
    # head (fp16 as every AWQ head): 6,626,242,560 + 4,544 = 6,626,247,104 params x 4.25 / 8 =
    # 3,520,193,774.5 B, + 295,469,056 x 2 = 590,938,112 B: 4,111,131,886.5 B a token at 1.008e12 B/s
    ref = _ref(tmp_path, dict(id="awq-x", hardware="NVIDIA RTX 4090 24GB", model="Falcon-7B",
                              weight_dtype="int4 (AWQ W4A16, g128)", metric="itl_ms", value="8.02",
                              framework="TinyChat (AWQ W4A16 kernels)", notes="per-token latency"),
               dict(id="awq-y", hardware="NVIDIA RTX 4090 24GB", model="LLaMA-2-7B",
                    weight_dtype="int4 (AWQ W4A16, g128)", metric="itl_ms", value="6.02",
                    framework="TinyChat (AWQ W4A16 kernels)", notes="per-token latency"))
    falcon, llama = ref.scenarios
    assert (falcon.weight_dtype, llama.weight_dtype) == ("int4_g64", "int4")
    assert mb.load_model("falcon-7b").total_params == 32 * 207_070_080 + 4_544 + 295_469_056
    from dataclasses import replace
    one = replace(falcon, prompt_tokens=0, output_tokens=1)
    assert mb.fidelity.predict(one, runtime="ideal") == pytest.approx(1e3 * 4_111_131_886.5 / 1.008e12, rel=1e-6)


def test_an_itl_row_measured_after_a_long_prompt_decodes_after_it(tmp_path):
    # TinyChat's README: LLaMA-2-7B's per-token latency was measured after a prompt of more than 500
    # tokens (its footnote; the row's notes say so): its decode reads 500 cached tokens more than the
    # rows that state no lengths (0 assumed). Llama-2-7B's f16 KV: 2 x 32 layers x 4096 x 2 B = 524,288
    # B a token; 128 steps from context 500 to 627 read 524,288 x (500 + 627) x 128 / 2 B more than
    # 128 steps from 0 to 127 read 524,288 x 127 x 128 / 2: 524,288 x 500 x 128 = 3.3554e10 B more
    notes = "per-token latency of generation stage (ms/token); LLaMA-2-7B measured with >500-token prompt"
    ref = _ref(tmp_path, dict(id="awq-x", hardware="NVIDIA RTX 4090 24GB", model="LLaMA-2-7B",
                              weight_dtype="f16", metric="itl_ms", value="16.17",
                              framework="HuggingFace transformers (FP16 baseline)", notes=notes),
               dict(id="awq-y", hardware="NVIDIA RTX 4090 24GB", model="Vicuna-7B",
                    weight_dtype="f16", metric="itl_ms", value="15.81",
                    framework="HuggingFace transformers (FP16 baseline)", notes="per-token latency"))
    long, short = ref.scenarios
    assert (long.prompt_tokens, long.output_tokens, short.prompt_tokens, short.output_tokens) == (500, 128, 0, 128)
    a, b = (mb.fidelity.predict(s, runtime="ideal") for s in (long, short))     # ms per token, pure roofline
    assert (a - b) * 128 / 1e3 == pytest.approx(524_288 * 500 * 128 / 1.008e12, rel=1e-6)
