"""membound.fidelity.mlperf_rows and mlperf_validate: MLPerf rows as served workloads (loader rules, skips;
predictions)."""
import dataclasses
import math

import numpy as np
import pandas as pd
import pytest

import membound as mb
from membound.fidelity import mlperf_validate as mv
from membound.fidelity import mlperf_rows as mrows
from membound.planning.rate_search import saturation
from membound.serving import build
from membound.serving.scheduler import Scheduler

from _cli import run_cli

COLUMNS = list(mrows.REQUIRED) + ["accel_variant"]


def _row(**kw):
    base = dict(round="v5.1", division="closed", submitter="X", system_name="sys", benchmark="llama3.1-8b",
                model="llama3.1-8b", scenario="Offline", tokens_per_s=8000.0, accelerator="NVIDIA H100-SXM-80GB",
                accel_family="H100", accel_variant="H100-SXM", accelerators_per_node=8, n_accelerators=8,
                tokens_per_s_per_accel=1000.0, framework="TensorRT 10.11, CUDA 12.9", software_stack="",
                precision="weights=fp8; inputs=int32; transform=quantization")
    base.update(kw)
    return base


def test_length_distribution_keeps_its_mean_and_bounds():
    d = mrows.length_distribution(294.45, 2, 1024, 0.9)
    assert d.mean == pytest.approx(294.45, abs=1.0)      # whole tokens: within a token of the mean
    assert min(d.values) >= 2 and max(d.values) <= 1024 and len(d.values) == mrows.LENGTH_POINTS
    with pytest.raises(mb.InvalidInputError):
        mrows.length_distribution(2000, 2, 1024, 0.9)


def test_shipped_workloads_cite_every_benchmark():
    b = mrows.load_benchmarks()
    assert {"llama2-70b", "llama3.1-8b", "llama3.1-405b", "mixtral-8x7b", "deepseek-r1", "gpt-oss-120b"} <= set(b)
    assert b["llama2-70b"].limits["Interactive"] == {"ttft_p99_s": 0.45, "tpot_p99_s": 0.04}   # the rules' limits
    assert b["llama2-70b"].output.mean == pytest.approx(294.45, abs=1.0)   # the reference's tokens per sample


def test_rows_skips_and_offline_prediction(tmp_path):
    rows = [_row(), _row(benchmark="llama3.1-8b-99.9"),              # the same run under two accuracy targets
            _row(scenario="Server", tokens_per_s=7000.0, tokens_per_s_per_accel=875.0),
            _row(division="open"), _row(scenario="SingleStream"), _row(accelerator="Acme X1", accel_family="Acme",
                                                                       accel_variant="X1"),
            _row(framework="PyTorch", software_stack="ipex"), _row(model="gptj", benchmark="gptj-99"),
            _row(model="qwen3-vl-235b-a22b", benchmark="qwen3-vl-235b-a22b")]
    path = tmp_path / "m.csv"
    pd.DataFrame(rows, columns=COLUMNS).to_csv(path, index=False)
    got, skipped = mrows.load_rows(path)
    assert [(r.benchmark, r.scenario) for r in got] == [("llama3.1-8b", "Offline"), ("llama3.1-8b", "Server"),
                                                        ("gptj", "Offline")]
    reasons = sorted(why for _, why, _ in skipped)
    assert reasons == sorted(["open division", "scenario SingleStream not modelled", "no profile for Acme",
                              "no runtime for the software stack",
                              "qwen3-vl-235b-a22b: image inputs (a vision encoder per request), not modelled"])
    off = got[0]
    mv.predict(got)
    assert (off.device, off.engine, off.tp, off.quantization.weights) == ("h100-sxm", "tensorrt-llm", 1, "fp8")
    # the stack names only the TensorRT library: an engine in the C++ executor, its v5.1 generation
    assert off.executor == "cpp"
    cpp = mrows.generation_runtime("tensorrt-llm-cpp", "v5.1")
    bench = mrows.load_benchmarks()["llama3.1-8b"]
    sm, sched, _ = build("llama-3.1-8b", "h100-sxm", prompt=bench.prompt, output=bench.output,
                         quantization=off.quantization, runtime=cpp)
    # Offline: the saturated engine's output tokens per second over its one accelerator
    assert off.pred["tok_s_per_accel"] == pytest.approx(saturation(sm, sched, bench.prompt, bench.output)
                                                        * bench.output.mean, rel=1e-9)
    srv = got[1].pred
    assert 0 < srv["tok_s_per_accel"] < off.pred["tok_s_per_accel"]       # within limits: below saturation
    assert srv["ttft_p99_s"] <= 2.0 + 1e-9 and srv["tpot_p99_s"] <= 0.1 + 1e-9
    # gptj: beam search of 4 (workloads.yaml), 69 tokens a sample (mlperf.conf's scaling factor)
    gj = mrows.load_benchmarks()["gptj"]
    assert gj.beams == 4 and gj.limits["Server"] == {"e2e_p99_s": 20.0} and gj.output.mean == pytest.approx(69, abs=1)
    sm, sched, _ = build("gpt-j-6b", "h100-sxm", prompt=gj.prompt, output=gj.output, quantization=got[2].quantization,
                         runtime=cpp, n_chips=got[2].tp)
    assert got[2].pred["tok_s_per_accel"] == pytest.approx(saturation(sm, sched, gj.prompt, gj.output, beams=4)
                                                           * gj.output.mean / got[2].tp, rel=1e-9)
    text = mv.report(got, skipped, source=path)
    assert "Offline" in text and "coverage: 3 of 8 rows predicted" in text
    # closed rows of shipped presets: the 3 predicted, SingleStream, Acme and PyTorch: 3 of 6 (qwen3-vl: no preset)
    assert "of the 6 closed-division rows of presets membound ships, 50.0% predicted" in text
    cli = run_cli("validate", "--mlperf", "--reference", str(path), "--csv", str(tmp_path / "out.csv"))
    assert cli.returncode == 0 and "coverage: 3 of 8 rows predicted" in cli.stdout
    assert list(pd.read_csv(tmp_path / "out.csv").scenario) == ["Offline", "Server", "Offline"]


def test_formats_and_the_layout_rule():
    h100, mi300 = mb.load_hardware("h100-sxm"), mb.load_hardware("mi300x")
    assert mrows.weight_format("weights=fp16; inputs=int32; transform=quantization, affine fusion", h100, "v4.1") == "fp8"
    assert mrows.weight_format("weights=fp4", mi300, "v5.1") == "mxfp4"
    assert mrows.weight_format("nan", h100, "v4.0") == "fp8"
    # Llama-2-70B (68.98e9 parameters): in bf16 137.95 GB, 68.98 GB a chip over two H100s, within
    # 85% of 85.52e9 B = 72.69 GB (one chip would hold 137.95: no); in fp8 68.98 GB fit one; a node
    # of 2 leaves only groups of 1 and 2
    assert mrows.layouts("llama-2-70b", "h100-sxm", "bf16", 8) == [mb.Parallel(tp=n) for n in (2, 4, 8)]
    assert mrows.layouts("llama-2-70b", "h100-sxm", "fp8", 2) == [mb.Parallel(tp=1), mb.Parallel(tp=2)]
    # a MoE model also runs expert parallel with data-parallel attention
    assert mb.Parallel(ep=8) in mrows.layouts("mixtral-8x7b", "h100-sxm", "fp8", 8)
    assert mrows.engine_of("vLLM 0.9.0, PyTorch 2.7.0") == "vllm" and mrows.engine_of("PyTorch") is None


def test_reference_path_errors(tmp_path):
    with pytest.raises(mb.InvalidInputError):
        mrows.mlperf_csv(tmp_path)
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n")
    with pytest.raises(mb.InvalidInputError, match="missing"):
        mrows.load_rows(bad)


def test_generations_fall_back_and_need_two_chips():
    # no runtime file for a round: the engine's own runtime; a fit needs rows on two chips at least
    assert mrows.generation("tensorrt-llm", "v0.1") == "tensorrt-llm"
    q = mb.Quantization("fp8", "fp8")
    one_chip = [mrows.MLPerfRow(f"v5.1/X/s{i}/llama3.1-8b/Offline", "v5.1", "llama3.1-8b", "Offline", "H200", "h200",
                             "tensorrt-llm", q, 8, 1000.0, executor="cpp") for i in range(3)]
    assert mv.fit_generation(one_chip, "tensorrt-llm-cpp", "v5.1") is None


BENCH = mrows.Benchmark("b", "llama-3.1-8b", mrows.length_distribution(100, 10, 200, 0.5),
                     mrows.length_distribution(100, 10, 200, 0.5), {})


@pytest.mark.parametrize("stack, executor", [
    ("TensorRT 10.14, CUDA 13.1", "cpp"),                     # only the TensorRT library: an engine
    ("TensorRT 9.3.0, CUDA 12.2 nan", "cpp"),
    # NVIDIA's v6.0 endpoint rows name TensorRT-LLM and Dynamo: the LLM API's PyTorch executor
    ("TensorRT 10.14, CUDA 13.1, cuDNN 9.17, TensorRT-LLM feat/1.2-mlpinf, NVIDIA Dynamo mlperf-v6.0", "pytorch"),
    ("PyTorch 2.10.0a0, TensorRT 10.14.1.48, TensorRT-LLM 1.3.0rc0", "pytorch"),
    # an engine built with trtllm-build runs in the C++ executor, even behind trtllm-serve
    ("TensorRT-LLM 1.0.0 (FP8 W8A8 engine built with trtllm-build, served by trtllm-serve)", "cpp")])
def test_the_executor_comes_from_the_rows_own_stack(stack, executor):
    assert mrows.executor_of("tensorrt-llm", stack, BENCH) == executor


def test_a_benchmark_served_only_from_endpoints_and_other_engines():
    # DeepSeek-R1's and gpt-oss's submissions run trtllm-serve (workloads.yaml `executor`, cited),
    # whatever the stack column says; unless the row says it built an engine; vLLM has one executor
    b = mrows.load_benchmarks()
    assert (b["deepseek-r1"].executor, b["gpt-oss-120b"].executor, b["llama2-70b"].executor) == ("pytorch",) * 2 + ("",)
    assert mrows.executor_of("tensorrt-llm", "TensorRT 10.11, CUDA 12.9", b["deepseek-r1"]) == "pytorch"
    assert mrows.executor_of("tensorrt-llm", "TensorRT 10.11, CUDA 12.9", b["llama2-70b"]) == "cpp"
    assert mrows.executor_of("vllm", "vLLM 0.9.0, TensorRT", b["llama2-70b"]) == ""


GENS = {"g": {"engine": "tensorrt-llm", "executor": "cpp", "served": {"per_request_s": {"value": 0.0}},
              "fit": {"per_sequence_s": {"unit": "s", "prior": [1e-7, 1e-3], "meaning": "m"}},
              "rounds": {"v9": {"per_sequence_s": {"value": 2e-5}}}}}


def test_a_generation_is_the_engine_with_its_constants_replaced():
    trt = mb.load_runtime("tensorrt-llm")
    v9, v8 = mrows.generation_runtime("g", "v9", generations=GENS), mrows.generation_runtime("g", "v8", generations=GENS)
    v10 = mrows.generation_runtime("g", "v10.1", generations=GENS)
    # the round's fit (2e-5 s); a later round without one carries it (v10.1 > v9: by number, not text);
    # an earlier round the engine's own value; per_request_s 0 (the generation's) in all
    assert (v9.served.per_sequence_s, v10.served.per_sequence_s) == (2e-5, 2e-5)
    assert v8.served.per_sequence_s == trt.served.per_sequence_s
    assert (v9.served.per_request_s, v9.name, v8.name) == (0.0, "g-mlperf-v9", "g-mlperf-v8")
    # every other constant is the engine's, as it stands
    assert v9.served.compute_fraction == trt.served.compute_fraction and v9.served.per_layer_s == trt.served.per_layer_s
    assert mrows.generation_runtime("g", "v9", {"per_sequence_s": 7e-6}, GENS).served.per_sequence_s == 7e-6
    with pytest.raises(mb.InvalidInputError):
        mrows.generation_runtime("nope", "v9", generations=GENS)


def test_a_cold_generation_fit_recovers_the_constant_it_was_made_with():
    # rows on two chips whose "measured" throughput is the prediction at 3e-5 s per sequence per step:
    # the cold fit (from the prior's middle, 1e-5 s) returns 3e-5 and writes it as the round's value
    q = mb.Quantization("fp8", "fp8")
    rows = [mrows.MLPerfRow(f"v9/X/{dev}/llama3.1-8b/Offline", "v9", "llama3.1-8b", "Offline", fam, dev, "tensorrt-llm",
                         q, 8, 1.0, executor="cpp") for fam, dev in (("H100", "h100-sxm"), ("H200", "h200"))]
    truth = mrows.generation_runtime("g", "v9", {"per_sequence_s": 3e-5}, GENS)
    made = [r.fresh() for r in rows]
    mv.predict(made, runtimes={("tensorrt-llm", "cpp", "v9"): truth})
    for r, m in zip(rows, made):
        r.measured = m.pred["tok_s_per_accel"]
    rep = mv.fit_generation(rows, "g", "v9", generations=GENS)
    assert rep.params["per_sequence_s"] == pytest.approx(3e-5, rel=0.02) and not rep.at_bounds
    doc = mv.with_fits({("g", "v9"): (rep, ["h100-sxm", "h200"])}, GENS)
    entry = doc["g"]["rounds"]["v9"]["per_sequence_s"]
    assert entry["status"] == "fitted" and entry["chips"] == ["h100-sxm", "h200"] and entry["prior"] == [1e-7, 1e-3]
    assert entry["value"] == pytest.approx(3e-5, rel=0.02) and doc["g"]["at_bound"] == {}
    # a fit on its prior's bound is missing physics: listed apart, not a round's value
    bound = dataclasses.replace(rep, at_bounds=("per_sequence_s=1e-07 (lower bound)",))
    doc = mv.with_fits({("g", "v9"): (bound, ["h100-sxm", "h200"])}, GENS)
    assert doc["g"]["rounds"] == {} and "missing physics" in doc["g"]["at_bound"]["v9"]["status"]


def test_rows_faster_than_the_compute_ceiling_refute_their_lengths():
    # Llama-2-70B (68.98e9 active parameters) on H200 in fp8 (1.979e15 dense FLOP/s), prompts of
    # 700 and outputs of 294.45 tokens: 2 x 68.98e9 x (700 + 294.45) = 1.372e14 FLOPs a request,
    # 1.979e15 x 294.45 / 1.372e14 = 4,247 output tokens/s per GPU at most
    q = mb.Quantization("fp8", "fp8")
    bench = mrows.Benchmark("l", "llama-2-70b", mrows.length_distribution(700, 16, 1024, 0.6),
                         mrows.length_distribution(294.45, 2, 1024, 0.9), {})
    row = mrows.MLPerfRow("v5.1/X/s/l/Offline", "v5.1", "l", "Offline", "H200", "h200", "tensorrt-llm", q, 8, 4400.0)
    m, hw = mb.load_model("llama-2-70b"), mb.load_hardware("h200")
    hand = hw.compute_flops["fp8"] * bench.output.mean / (2 * m.active_params * (bench.prompt.mean + bench.output.mean))
    assert mv.compute_ceiling(row, bench) == pytest.approx(hand, rel=1e-12) and 4100 < hand < 4400
    slow = mrows.MLPerfRow("v5.1/X/t/l/Offline", "v5.1", "l", "Offline", "H200", "h200", "tensorrt-llm", q, 8, 4000.0)
    srv = mrows.MLPerfRow("v5.1/X/s/l/Server", "v5.1", "l", "Server", "H200", "h200", "tensorrt-llm", q, 8, 4400.0)
    assert mv.refuted([row, slow, srv], {"l": bench}) == {"l": 1}     # Offline rows only, the one above it


def test_shipped_generation_fits_name_their_rows_and_stay_inside_their_priors():
    gens = mrows.load_generations()
    g = gens["tensorrt-llm-cpp"]
    assert g["engine"] == "tensorrt-llm" and g["served"]["per_request_s"]["status"] == "code"
    # form (B) of its `forms`: per_request_s and the capacity policy are replaced; the GEMM share is the
    # engine's, as it stands
    assert list(g["served"]) == ["per_request_s", "per_sequence_layer_s", "pipeline_host_s", "preemption"] \
        and g["served"]["preemption"]["status"] == "code"
    # the engine's per-layer per-sequence cost is not added: each round's per_sequence_s prices the whole
    assert g["served"]["per_sequence_layer_s"]["value"] == 0.0 and g["served"]["per_sequence_layer_s"]["status"] == "assumed"
    # nor the PyTorch loop's host time under pipeline stages: the C++ executor runs its own
    assert g["served"]["pipeline_host_s"]["value"] == 0.0
    trt = mb.load_runtime("tensorrt-llm").served
    assert mrows.generation_runtime("tensorrt-llm-cpp", "v5.1").served.compute_fraction == trt.compute_fraction
    # a round fitted on its prior's bound is missing physics: listed apart and carried over from the
    # latest earlier interior fit, never used
    for rnd, e in g["at_bound"].items():
        assert rnd not in g["rounds"] and "missing physics" in e["status"]
        earlier = max((r for r in g["rounds"] if mrows.round_key(r) < mrows.round_key(rnd)), key=mrows.round_key)
        assert mrows.generation_runtime("tensorrt-llm-cpp", rnd).served.per_sequence_s == \
            g["rounds"][earlier]["per_sequence_s"]["value"]
    for rnd, fits in g["rounds"].items():
        assert list(fits) == [mrows.fitted_param(g, rnd)], rnd                  # one constant a round, its own
        e = fits[mrows.fitted_param(g, rnd)]
        lo, hi = e["prior"]
        assert e["status"] == "fitted" and lo < e["value"] < hi, rnd
        assert len(e["chips"]) >= 2 and "fit families" in e["fitted_on"], rnd     # one constant, two chips at least
    # form G1 (the fp8 GEMMs' rate fitted from v5.1 on) was measured and not adopted: no round runs an fp8 rate
    assert all(mrows.generation_runtime("tensorrt-llm-cpp", r).served.fp8_rate == 0.0 for r in ("v4.1", "v5.1", "v6.1"))


def test_serve_percentiles_under_poisson_arrivals_come_from_the_tail_model():
    r = mb.serve("llama-3.1-8b", "h100-sxm", arrival_rate=5.0, prompt_tokens=mb.serving.Uniform(500, 1500),
                 output_tokens=mb.serving.Uniform(50, 400), runtime="vllm", weight_dtype="fp8")
    assert r.tpot.p99 > r.tpot.median and r.ttft.p99 > r.ttft.p90 > r.ttft.median    # a tail, not the mean


def test_cpu_only_rows_are_host_processors(tmp_path):
    # A CPU-only system: its host processors run the model. The row names the CPU in host_processor,
    # 2 sockets a node; 800 tokens/s over 1 node x 2 sockets = 400 per socket; PyTorch with Intel's
    # extensions runs as the `device` runtime; an older row without a precision names its format in
    # the description ("...-INT4"), a socket the loader has no profile for is skipped by name.
    cols = COLUMNS + ["host_processor", "host_processors_per_node", "nodes", "system_desc"]
    cpu = dict(accelerator=float("nan"), accel_family="CPU-only", accel_variant="", accelerators_per_node=0,
               n_accelerators=0, tokens_per_s_per_accel=float("nan"), framework="PyTorch", software_stack="",
               host_processors_per_node=2, nodes=1)
    rows = [_row(**cpu, tokens_per_s=800.0, host_processor="Intel(R) Xeon(R) 6980P", precision="weights=INT8",
                 system_desc="1-node-2S-GNR"),
            _row(**cpu, model="gptj", benchmark="gptj-99", round="v4.0", precision=float("nan"),
                 host_processor="Intel(R) Xeon(R) Platinum 8480+", system_desc="1-node-2S-SPR-PyTorch-INT4"),
            _row(**cpu, model="gptj", benchmark="gptj-99", round="v3.1", precision=float("nan"),
                 host_processor="Intel(R) Xeon(R) Platinum 8480+", system_name="1-node-2S-SPR-PyTorch-INT8",
                 system_desc="Dell PowerEdge Server R760 (1x Intel Xeon Platinum 8480+)"),   # the format only in its name
            _row(**cpu, host_processor="Acme CPU 9000", precision="weights=INT8", system_desc="")]
    path = tmp_path / "cpu.csv"
    pd.DataFrame(rows, columns=cols).to_csv(path, index=False)
    got, skipped = mrows.load_rows(path)
    # the v5.1 llama3.1-8b row ran Intel's SGLang launch whatever its precision column says (workloads.yaml
    # cpu_engine: the W4A8 AutoRound checkpoint): int4 weights, int8 activations
    assert [(r.device, r.engine, r.per_node, r.quantization.weights) for r in got] == [
        ("xeon-6980p", "device", 2, "int4"), ("xeon-platinum-8480p", "device", 2, "int4"),
        ("xeon-platinum-8480p", "device", 2, "int8")]
    assert got[0].quantization.activations == "int8" and got[1].quantization.activations is None
    assert got[0].quantization.head_weights == "bf16"     # AutoRound without --quant_lm_head: lm_head stays bf16
    assert got[0].measured == pytest.approx(800.0 / 2) and got[0].family == "CPU-only"
    assert [why for _, why, _ in skipped] == ["no profile for the CPU Acme CPU 9000"]
    # the launch a CPU row runs is its benchmark's cpu_engine entry for its round (and its system's words):
    # the v5.1 llama row the first, the v4.0 gptj rows none (neither names ITREX)
    assert [r.cpu_launch for r in got] == [0, -1, -1]


def test_intels_v40_itrex_row_runs_neural_speed_and_its_partners_do_not(tmp_path):
    # v4.0: Intel's 1-node-2S-EMR-ITREX ran the Neural Speed launch (workloads.yaml gptj cpu_engine, entry 1:
    # int4 weights, int8 compute) though its name gives no format; another v4.0 EMR row keeps its name's
    # INT4 (weight-only) and the plain mapping
    cols = COLUMNS + ["host_processor", "host_processors_per_node", "nodes", "system_desc", "host_processor_core_count"]
    cpu = dict(accelerator=float("nan"), accel_family="CPU-only", accel_variant="", accelerators_per_node=0,
               n_accelerators=0, tokens_per_s_per_accel=float("nan"), framework="PyTorch", software_stack="",
               host_processors_per_node=2, nodes=1, model="gptj", benchmark="gptj-99", round="v4.0",
               precision=float("nan"), host_processor="INTEL(R) XEON(R) PLATINUM 8592+", host_processor_core_count=64)
    rows = [_row(**cpu, system_name="1-node-2S-EMR-ITREX", system_desc="1-node-2S-EMR-ITREX"),
            _row(**cpu, system_name="1-node-2S-C240M7-EMR-PyTorch-INT4", system_desc="")]
    path = tmp_path / "cpu.csv"
    pd.DataFrame(rows, columns=cols).to_csv(path, index=False)
    got, _ = mrows.load_rows(path)
    assert [(r.device, r.cpu_launch, r.cores, r.quantization.weights, r.quantization.activations) for r in got] == [
        ("xeon-platinum-8592p", 1, 64, "int4", "int8"), ("xeon-platinum-8592p", -1, 0, "int4", None)]


def test_a_card_of_two_gpus_is_two_devices(tmp_path):
    # Maxsun's Arc Pro B60 Dual 48G: the table counts 4 cards ("(2 GPUs/card)"), 24 GB GPUs: 8 devices a
    # node, and a card's 1,000 tokens/s per accelerator are 500 per GPU; a one-GPU card stays as listed
    dual = dict(accelerator="MS-Intel Arc Pro B60 Dual 48G Turbo", accel_family="Intel-Arc-Pro-B60",
                accel_variant="Intel-Arc-Pro-B60-Dual(2 GPUs/card)", accelerators_per_node=4, n_accelerators=4,
                tokens_per_s=4000.0, tokens_per_s_per_accel=1000.0, framework="PyTorch vLLM",
                precision="weights=INT8; inputs=INT8; transform=Yes")
    rows = [_row(**dual), _row(**{**dual, "accelerator": "Intel(R) Arc Pro(R) B60", "accel_variant": "Intel-Arc-Pro-B60"})]
    path = tmp_path / "dual.csv"
    pd.DataFrame(rows, columns=COLUMNS).to_csv(path, index=False)
    got, skipped = mrows.load_rows(path)
    assert not skipped
    assert [(r.device, r.per_node, r.measured) for r in got] == [("arc-pro-b60", 8, 500.0), ("arc-pro-b60", 4, 1000.0)]


def test_the_measured_openorca_prompts_no_longer_refute_the_fit_families_rows():
    # workloads.yaml: llama2-70b's prompts measured on the dataset's 24,576 samples, mean 222.3 tokens
    # (was an assumed 700). Its H200 fp8 ceiling by hand: 2 x 68.98e9 x (222.3 + 294.45) = 7.129e13 FLOPs a
    # request, 1.979e15 x 294.45 / 7.129e13 = 8,174 output tokens/s per GPU: the 4,400 row is below it
    bench = mrows.load_benchmarks()["llama2-70b"]
    assert sum(bench.prompt.values) / len(bench.prompt.values) == pytest.approx(222.3, abs=0.5)
    assert min(bench.prompt.values) >= 48 and max(bench.prompt.values) <= 1021
    q = mb.Quantization("fp8", "fp8")
    row = mrows.MLPerfRow("v5.1/X/s/llama2-70b/Offline", "v5.1", "llama2-70b", "Offline", "H200", "h200",
                       "tensorrt-llm", q, 8, 4400.0)
    assert mv.compute_ceiling(row, bench) == pytest.approx(8174, rel=2e-3)
    assert mv.refuted([row], {"llama2-70b": bench}) == {}


def test_a_refit_without_refuted_benchmarks_clears_the_set_aside_list():
    # a generation whose document still names a set-aside benchmark: a refit where none is refuted lists none
    gens = {"g": {**GENS["g"], "set_aside": {"llama2-70b": "stale"}}}
    assert mv.with_fits({}, gens)["g"]["set_aside"] == {}
    assert list(mv.with_fits({}, gens, aside={"b": 3})["g"]["set_aside"]) == ["b"]


def test_published_instance_sizes_narrow_the_layouts_in_their_rounds_only():
    # NVIDIA's harness runs Llama-2-70B on H100 SXM as 2-GPU instances (v4.0/v4.1 tensor_parallelism 2):
    # on an 8-GPU node the layouts left are those of 2 chips; another round, or a node without a pair,
    # keeps every layout the weights fit (1, 2, 4 and 8 chips: 69 GB of fp8 weights fit one 80 GB H100)
    bench = mrows.Benchmark("l", "llama-2-70b", mrows.length_distribution(222.3, 48, 1021, 0.771),
                         mrows.length_distribution(294.45, 2, 1024, 0.787), {},
                         instance_chips={"tensorrt-llm": {"h100-sxm": 2}}, instance_rounds=("v4.1",))
    every = mrows.layouts("llama-2-70b", "h100-sxm", "fp8", 8)
    assert sorted(lay.chips for lay in every) == [1, 2, 4, 8]
    assert [lay.chips for lay in mrows.instance_layouts(bench, "tensorrt-llm", "h100-sxm", "v4.1", "fp8", 8)] == [2]
    assert mrows.instance_layouts(bench, "tensorrt-llm", "h100-sxm", "v6.0", "fp8", 8) == every
    assert mrows.instance_layouts(bench, "vllm", "h100-sxm", "v4.1", "fp8", 8) == every
    assert [lay.chips for lay in mrows.instance_layouts(bench, "tensorrt-llm", "h100-sxm", "v4.1", "fp8", 1)] == [1]
    shipped = mrows.load_benchmarks()
    assert shipped["llama2-70b"].instance_chips["tensorrt-llm"]["h100-sxm"] == 2
    assert shipped["llama3.1-405b"].instance_chips["tensorrt-llm"]["h200"] == 8


def test_a_generation_fits_exactly_one_constant_a_round():
    # issue 27's budget: one constant a round over at least two chips; the `fit` block names it
    assert mrows.fitted_param({"fit": {"compute_fraction": {"prior": [0.3, 1.0]}}}) == "compute_fraction"
    for bad in ({"fit": {}}, {"fit": {"a": {}, "b": {}}}, {}):
        with pytest.raises(mb.InvalidInputError):
            mrows.fitted_param(bad)


def test_cpu_layouts_split_a_socket_as_the_launch_scripts_do():
    # Intel's v5.1/v6.0 configure_workload.sh: Offline 7 cores an instance, Server 42, 8 and 32 on a node of
    # 192 cores; instances = cores // cores per instance. By hand: a 128-core socket holds 18 Offline instances
    # (18 x 7 = 126 <= 128 < 133 = 19 x 7) and 3 Server ones (3 x 42 = 126); an 86-core socket 12 (84 <= 86 < 91)
    # and 2 (84); a 96-core socket of a 2-socket node (192 cores) 12 of 8 cores (96) and 3 of 32 (96)
    bench = mrows.load_benchmarks()["llama3.1-8b"]
    sglang = mrows.cpu_engine_of(bench, "v6.0")

    def split(eng, sc, dev, cores, sockets=2):
        lay = mrows.cpu_layout(eng, sc, dev, cores, sockets)
        return lay.cores, lay.instances, lay.memory, lay.max_running, lay.token_budget
    # Offline the client holds at most 64 prompts in flight a server (BATCH_SIZE=64, one blocking request a batch)
    assert split(sglang, "Offline", "xeon-6980p", 128) == (7, 18, pytest.approx(1 / 18), 64, 8192)
    assert split(sglang, "Server", "xeon-6980p", 128) == (42, 3, pytest.approx(1 / 3), 32, 8192)
    assert split(sglang, "Offline", "xeon-6787p", 86)[:2] == (7, 12)
    assert split(sglang, "Server", "xeon-6787p", 86)[:2] == (42, 2)
    assert split(sglang, "Offline", "xeon-6972p", 96)[:2] == (8, 12)
    assert split(sglang, "Server", "xeon-6972p", 96)[:2] == (32, 3)
    with pytest.raises(mb.InvalidInputError, match="host_processor_core_count"):
        mrows.cpu_layout(sglang, "Server", "xeon-6787p", 32, 1)          # fewer cores than one instance pins
    with pytest.raises(mb.InvalidInputError, match="scenario"):
        mrows.cpu_layout(sglang, "Interactive", "xeon-6980p", 128, 2)
    # v6.1's vLLM launch: one engine rank per NUMA node Offline (1536 sequences, 32768 tokens a step), one per two
    # Server (32, 256; 1024 on 192-core nodes), 2 cores of each rank left to its server. By hand: a 6980P socket
    # (3 NUMA nodes) runs 3 Offline ranks of 128/3 - 2 = 40.667 cores with a third of its memory each, and 1.5
    # Server engines of 2 x 128/3 - 2 = 83.333 cores and two thirds of it; a 6787P socket (2 nodes) 2 Offline ranks
    # of 86/2 - 2 = 41 cores and 1 Server engine of 84; a 96-core 6972P's Server engine budgets 1024 tokens
    vllm = mrows.cpu_engine_of(bench, "v6.1")
    assert split(vllm, "Offline", "xeon-6980p", 128) == (pytest.approx(128 / 3 - 2), 3, pytest.approx(1 / 3), 1536,
                                                         32768)
    assert split(vllm, "Server", "xeon-6787p", 86) == (84, 1, 1, 32, 256)
    assert split(vllm, "Offline", "xeon-6787p", 86)[:3] == (41, 2, 0.5)
    assert split(vllm, "Server", "xeon-6972p", 96)[1:] == (1.5, pytest.approx(2 / 3), 32, 1024)
    with pytest.raises(mb.InvalidInputError, match="prefill and decode"):
        mrows.cpu_layout(vllm, "Server", "xeon-6980p", 128, 2)        # 256-core nodes split prefill from decode
    with pytest.raises(mb.InvalidInputError, match="NUMA"):
        mrows.cpu_layout(vllm, "Offline", "xeon-platinum-8480p", 56, 2)
    assert mrows.cpu_engine_of(bench, "v6.1")["kv"] == "fp8" and not mrows.cpu_engine_of(bench, "v4.1")


def test_gptj_cpu_workers_split_each_numa_node_as_intels_v41_harness_does():
    # Intel's v4.1 gptj harness (workloads.yaml gptj cpu_engine): a process per NUMA node, WORKERS_PER_PROC
    # workers each pinned to 8 cores Offline (12 requests x 4 beams = 48 sequences), 1 of 32 or 40 cores
    # Server (4 x 4 = 16). By hand: an EMR 8592+ socket (64 cores, 2 NUMA nodes) runs 2 x 4 = 8 Offline
    # workers with 1/8 of its memory each and 2 x 1 = 2 Server workers of 32 cores with half of it; a GNR
    # 6980P socket of a 256-core node (3 NUMA nodes of 128/3 = 42.67 cores) 3 x 5 = 15 Offline workers of
    # 8 cores (40 <= 42.67) with 1/15 of its memory, and 3 Server workers of 40 cores with a third
    gptj = mrows.cpu_engine_of(mrows.load_benchmarks()["gptj"], "v4.1")

    def split(sc, dev, cores):
        lay = mrows.cpu_layout(gptj, sc, dev, cores, 2)
        return lay.cores, lay.instances, lay.memory, lay.max_running, lay.token_budget
    assert split("Offline", "xeon-platinum-8592p", 64) == (8, 8, pytest.approx(1 / 8), 48, 2048)
    assert split("Server", "xeon-platinum-8592p", 64) == (32, 2, 0.5, 16, 2048)
    assert split("Offline", "xeon-6980p", 128) == (8, 15, pytest.approx(1 / 15), 48, 2048)
    assert split("Server", "xeon-6980p", 128) == (40, 3, pytest.approx(1 / 3), 16, 2048)
    assert (gptj["weights"], gptj["activations"]) == ("int4", "int8")    # quant_gptj int4 weights, int8 compute
    # 5 workers of 8 cores need 40 of a NUMA node's cores: a 96-core socket's 32 cannot hold them
    three = {**gptj, "numa_nodes": {"xeon-6980p": 3}, "node_cores": {192: gptj["node_cores"][256]}}
    with pytest.raises(mb.InvalidInputError, match="host_processor_core_count"):
        mrows.cpu_layout(three, "Offline", "xeon-6980p", 96, 2)
    # v4.0: only Intel's ITREX system ran that launch (its README), the other v4.0 systems other code, not read
    bench = mrows.load_benchmarks()["gptj"]
    assert mrows.cpu_launch_of(bench, "v4.0", "1-node-2S-EMR-ITREX") == 1 and mrows.cpu_launch_of(bench, "v4.1") == 0
    assert mrows.cpu_engine_of(bench, "v4.0", "1-node-2S-EMR-ITREX")["scenarios"] == gptj["scenarios"]
    assert mrows.cpu_launch_of(bench, "v4.0", "R760_CPU") == -1 and not mrows.cpu_engine_of(bench, "v4.0")
    assert mrows.cpu_launch_of(bench, "v3.1", "1-node-2S-SPR-PyTorch-INT8") == -1     # no v3.1 code read


def test_a_cpu_socket_prediction_is_its_instances_times_one_instance():
    # an 86-core Xeon 6787P socket Offline: 12 instances of 7 cores, each 7/86 of the socket's compute and
    # 1/12 of its memory, 64 sequences (the client's batch) and 8192 tokens a step, prefill apart from decode
    # (SGLang): the socket's output tokens/s are 12 x one instance's saturation x the mean output
    bench = mrows.load_benchmarks()["llama3.1-8b"]
    q = mb.Quantization("int4", None, activations="int8")
    row = mrows.MLPerfRow("v5.1/X/s/llama3.1-8b/Offline", "v5.1", "llama3.1-8b", "Offline", "CPU-only", "xeon-6787p",
                       mrows.CPU_ENGINE, q, 2, 400.0, cores=86, cpu_launch=mrows.cpu_launch_of(bench, "v5.1"))
    mv.predict([row])
    # computing at the share that gives Intel's own prefill time a prompt token (workloads.yaml prefill_token_s,
    # Offline, on 42 cores), scaled to the instance's 7 cores (`timed_share`)
    sglang = mrows.cpu_engine_of(bench, "v5.1")
    lay = mrows.cpu_layout(sglang, "Offline", "xeon-6787p", 86, 2)
    sm0, _, _ = build(bench.preset, mrows.cpu_part("xeon-6787p", lay, 86), prompt=bench.prompt, output=bench.output,
                      quantization=q, runtime="device")
    timed = sglang["prefill_token_s"]
    part = mrows.cpu_part("xeon-6787p", lay, 86, 0.5 * sm0.prefill_token_s / (timed["Offline"] * timed["cores"] / 7))
    sm, sched, _ = build(bench.preset, part, prompt=bench.prompt, output=bench.output, quantization=q,
                         runtime="device", scheduler=mb.serving.Scheduler(max_running=64, token_budget=8192,
                                                                  mixed_steps=False))
    one = saturation(sm, sched, bench.prompt, bench.output) * bench.output.mean
    assert row.pred["tok_s_per_accel"] == pytest.approx(12 * one)
    assert row.layout == "12 instances of 7 cores per socket"


def test_a_timed_cpu_engine_computes_at_the_share_that_gives_its_own_prefill_time():
    # share = fraction x (model's GEMM seconds a prompt token at that fraction) / (timed seconds scaled to the
    # instance's cores): a launch timed at 0.000625 s a token on 42 cores, an instance of 7 cores takes
    # 0.000625 x 42 / 7 = 0.00375 s; a model at 0.5 taking 0.0015 s there computes at 0.5 x 0.0015 / 0.00375 = 0.2
    eng = {"prefill_token_s": {"cores": 42, "Offline": 0.000625}}
    assert mrows.timed_share(eng, "Offline", 7, 0.5, 0.0015) == pytest.approx(0.2)
    assert mrows.timed_share(eng, "Server", 7, 0.5, 0.0015) == 0.5          # not timed for that scenario
    with pytest.raises(mb.InvalidInputError, match="prefill_token_s"):
        mrows.timed_share({"prefill_token_s": {"cores": 42, "Offline": 0.0}}, "Offline", 7, 0.5, 0.0015)
    # SGLang's launch (v5.1, v6.0) is timed by Intel's own Server batcher: the engine built at that share takes
    # exactly the timed seconds a prompt token (scaled to its cores), Offline (7 cores) and Server (42)
    bench = mrows.load_benchmarks()["llama3.1-8b"]
    sglang = mrows.cpu_engine_of(bench, "v6.0")
    q = mb.Quantization("int4", None, activations="int8")
    for sc in ("Offline", "Server"):
        lay = mrows.cpu_layout(sglang, sc, "xeon-6980p", 128, 2)
        part = mrows.cpu_part("xeon-6980p", lay, 128)
        assert part.achievable.compute_fraction == 0.5                      # the profile's
        sm, _, _ = build(bench.preset, part, prompt=bench.prompt, output=bench.output, quantization=q, runtime="device")
        share = mrows.timed_share(sglang, sc, lay.cores, 0.5, sm.prefill_token_s)
        timed = sglang["prefill_token_s"]
        sm2, _, _ = build(bench.preset, mrows.cpu_part("xeon-6980p", lay, 128, share), prompt=bench.prompt,
                          output=bench.output, quantization=q, runtime="device")
        assert sm2.prefill_token_s == pytest.approx(timed[sc] * timed["cores"] / lay.cores)
    # vLLM's v6.1 launch is not timed: the profile's 0.5
    vllm = mrows.cpu_engine_of(bench, "v6.1")
    assert mrows.timed_share(vllm, "Offline", 40.7, 0.5, 0.001) == 0.5


def test_published_scenario_caps_set_the_searched_engine(monkeypatch):
    # NVIDIA's v5.1 H200-SXM-141GBx8 Interactive llama2-70b config: gpu_batch_size 512, runtime max_num_tokens 256.
    # A step's decodes take one token each out of the 256, so at most 256 sequences run: (256, 256), chunked
    llama = mrows.load_benchmarks()["llama2-70b"]
    assert mrows.scenario_limits(llama, "tensorrt-llm", "h200", "v5.1", "Interactive") == Scheduler(
        max_running=256, token_budget=256, chunked_prefill=True)
    # B200-SXM-180GBx8 Server, v5.1 and v6.0 alike: 2048 sequences, 3584 tokens a step
    for rnd in ("v5.1", "v6.0"):
        assert mrows.scenario_limits(llama, "tensorrt-llm", "b200", rnd, "Server") == Scheduler(
            max_running=2048, token_budget=3584, chunked_prefill=True)
    # not read for another round, scenario, engine or chip: the engine's own knobs
    for args in (("tensorrt-llm", "h200", "v4.1", "Interactive"), ("tensorrt-llm", "h200", "v5.1", "Offline"),
                 ("vllm", "h200", "v5.1", "Interactive"), ("tensorrt-llm", "h100-nvl", "v5.1", "Server")):
        assert mrows.scenario_limits(llama, *args) is None
    # DeepSeek-R1 on B200 x8, Server: 512 sequences and 3456 tokens per attention-DP rank, no chunked context,
    # v6.0's attention-DP balancing timeout 6 iterations;
    # TensorRT-LLM's limits are per rank, so the instance of 8 ranks runs 8 x 512 = 4096 and 8 x 3456 = 27,648
    dsr1 = mrows.load_benchmarks()["deepseek-r1"]
    caps = mrows.scenario_limits(dsr1, "tensorrt-llm", "b200", "v6.0", "Server")
    assert caps == Scheduler(max_running=512, token_budget=3456, chunked_prefill=False, dp_balance_steps=6)
    lay = next(lay for lay in mrows.instance_layouts(dsr1, "tensorrt-llm", "b200", "v6.0", "nvfp4", 8) if lay.ep == 8)
    _, sched, _ = build("deepseek-r1", "b200", prompt=dsr1.prompt, output=dsr1.output,
                        quantization=mb.Quantization("nvfp4", "fp8"), runtime="tensorrt-llm", n_chips=8, parallel=lay,
                        scheduler=caps)
    assert (sched.max_running, sched.token_budget, sched.chunked_prefill) == (4096, 27648, False)
    # the rate search of a row runs the capped engine
    seen = []
    real = mv.search

    def spy(sm, sched, *a, **k):
        seen.append((sched.max_running, sched.token_budget))
        return real(sm, sched, *a, **k)
    monkeypatch.setattr(mv, "search", spy)
    row = mrows.MLPerfRow("v5.1/X/s/llama2-70b/Interactive", "v5.1", "llama2-70b", "Interactive", "H200", "h200",
                       "tensorrt-llm", mb.Quantization("fp8", "fp8"), 8, 2400.0, executor="cpp")
    mv.predict([row])
    assert seen == [(256, 256)] and row.pred["tok_s_per_accel"] > 0


def test_a_malformed_engine_limit_is_refused():
    for bad in ({"rounds": ["v5.1"], "max_running": 8}, {"max_running": 8, "token_budget": 8}, [8, 8],
                {"rounds": ["v5.1"], "max_running": 0, "token_budget": 8}):
        with pytest.raises(mb.InvalidInputError, match="llama2-70b.engine_limits"):
            mrows._engine_limits("llama2-70b.engine_limits.tensorrt-llm.Server.h200", bad)


def _server_row(fam, dev, rate_tok_s, tpot=math.nan):
    return mrows.MLPerfRow(f"v9/X/{dev}/llama3.1-8b/Server", "v9", "llama3.1-8b", "Server", fam, dev, "tensorrt-llm",
                        mb.Quantization("fp8", "fp8"), 8, rate_tok_s, executor="cpp", tpot_p50_s=tpot)


def _engines_with_step(*steps):
    """llama3.1-8b's benchmark and, per served per_step_s, a v9 generation's (StepModel, Scheduler, runtime)
    for 8B fp8 on one H100."""
    bench = mrows.load_benchmarks()["llama3.1-8b"]
    engines = []
    for step in steps:
        rt = mrows.generation_runtime("g", "v9", {"per_step_s": step}, GENS)
        sm, sched, _ = build("llama-3.1-8b", "h100-sxm", prompt=bench.prompt, output=bench.output,
                             quantization=mb.Quantization("fp8", "fp8"), runtime=rt)
        engines.append((sm, sched, rt))
    return bench, engines


def test_the_median_tpot_at_a_rows_own_load():
    # at 0.02 requests/s an 8B engine on one H100 decodes one request at a time: each output token is one
    # step, so 10 ms more a step (the served per_step_s) is 10 ms more a token (the median TPOT)
    bench, engines = _engines_with_step(0.0, 0.010)
    got = [mv.tpot_at_load(sm, sched, bench, 0.02) for sm, sched, _ in engines]
    sm, sched, rt = engines[-1]
    assert got[1] - got[0] == pytest.approx(0.010, rel=0.02)
    # beyond the engine's capacity there is no TPOT: inf
    assert mv.tpot_at_load(sm, sched, bench, 1e6) == math.inf
    # a row's load is its measured output tokens/s per accelerator x the instance's chips / the mean output:
    # 128 x 0.02 = 2.56 tokens/s on one chip is 0.02 requests/s, the same engine's TPOT
    row = _server_row("H100", "h100-sxm", 0.02 * bench.output.mean, tpot=0.05)
    mv.predict([row], runtimes={("tensorrt-llm", "cpp", "v9"): rt}, at_load=True)
    assert row.pred["tpot_p50_s"] == pytest.approx(got[1], rel=1e-9)
    assert row.pred["offline_tok_s_per_accel"] == pytest.approx(
        saturation(sm, sched, bench.prompt, bench.output) * bench.output.mean, rel=1e-9)
    text = mv.at_load([_server_row("H100", "h100-sxm", 0.02 * bench.output.mean, tpot=got[0]),
                       _server_row("H100", "h100-sxm", 1e9, tpot=0.05), _server_row("H100", "h100-sxm", 5.0)])
    # the measured TPOT the v9 runtime (here the engine's own runtime: no v9 generation is shipped) predicts
    # at that load is not the fit's, so only the counts are pinned: one row inside, one beyond, one unmeasured
    assert "H100" in text and "1 rows" in text and "(1 at or beyond saturation)" in text


def test_the_step_at_a_rows_own_decoding_batch():
    # Little's law: 7,515 output tokens/s on one chip at a 32.6 ms median TPOT is 7,515 x 0.0326 = 244.989
    # sequences decoding; two chips at 3,000 tokens/s each and 40 ms: 2 x 3,000 x 0.040 = 240
    assert mv.little_batch(7515.0, 1, 0.0326) == pytest.approx(244.989, rel=1e-12)
    assert mv.little_batch(3000.0, 2, 0.040) == pytest.approx(240.0, rel=1e-12)
    assert math.isnan(mv.little_batch(3000.0, 2, math.nan))
    # one sequence decoding alone: each of its output tokens is one step (its prompt's chunk makes the first), so
    # 10 ms more a step (per_step_s) is 10 ms more a token at a batch of one
    bench, engines = _engines_with_step(0.0, 0.010)
    got = [mv.tpot_at_batch(sm, sched, bench, 1.0) for sm, sched, _ in engines]
    sm, sched, rt = engines[-1]
    assert got[1] - got[0] == pytest.approx(0.010, rel=0.02)
    # more sequences decoding make a step longer; a batch beyond the scheduler's is its scheduler's batch
    cap = float(sched.max_running)
    assert mv.tpot_at_batch(sm, sched, bench, 64.0) > got[1]
    assert mv.tpot_at_batch(sm, sched, bench, 10.0 * cap) == mv.tpot_at_batch(sm, sched, bench, cap)
    # no batch measured, or less than one sequence: no step
    assert math.isnan(mv.tpot_at_batch(sm, sched, bench, math.nan))
    assert math.isnan(mv.tpot_at_batch(sm, sched, bench, 0.5))
    # a row's prediction at its load carries the step at its batch: 2.56 tokens/s x 0.390625 s = one sequence
    row = _server_row("H100", "h100-sxm", 2.56, tpot=0.390625)
    mv.predict([row], runtimes={("tensorrt-llm", "cpp", "v9"): rt}, at_load=True)
    assert row.pred["tpot_at_batch_s"] == pytest.approx(got[1], rel=1e-12)
    # the report counts every measured row at its batch, those beyond the model's saturation too
    text = mv.at_load([_server_row("H100", "h100-sxm", 2.56, tpot=0.390625),
                       _server_row("H100", "h100-sxm", 1e9, tpot=0.05), _server_row("H100", "h100-sxm", 5.0)])
    assert "(1 at or beyond saturation);  at the batch   2 rows" in text


def test_the_harness_admits_on_the_kv_a_request_holds_now_not_on_its_whole_length():
    # NVIDIA's harness runs TensorRT-LLM's MAX_UTILIZATION capacity scheduler (generations.yaml, cited):
    # a request is admitted on the blocks its next step needs, so at saturation a running sequence holds
    # its mean context, S + D / 2 tokens (D = T - 1 decode steps), plus half a 32-token block, in each
    # of Llama-2-70B's 80 layers; GUARANTEED_NO_EVICT (the served engine's, preemption "none") reserves
    # S + T. llama2-70b: S = 222.3, T = 294.45, D = 293.45:
    #   no evict:        80 x (222.3 + 294.45)              = 80 x 516.75  = 41,340 pairs a sequence
    #   max utilisation: 80 x (222.3 + 293.45 / 2 + 32 / 2) = 80 x 385.025 = 30,802 pairs a sequence
    # so the same cache runs 516.75 / 385.025 = 1.342 times the sequences
    cpp = mrows.generation_runtime("tensorrt-llm-cpp", "v4.1")
    assert cpp.served.preemption == "recompute" and mb.load_runtime("tensorrt-llm").served.preemption == "none"
    bench = mrows.load_benchmarks()["llama2-70b"]
    S, T = 222.3, 294.45          # workloads.yaml's means (its sampled distributions' differ in the 4th digit)
    caps = {}
    for policy in ("recompute", "none"):
        sm, sched, _ = build("llama-2-70b", "h200", prompt=bench.prompt, output=bench.output,
                             quantization=mb.Quantization("fp8", "fp8"), runtime=cpp,
                             scheduler=Scheduler(preemption=policy, max_running=4096, token_budget=8192))
        st = mb.serving.solve(sm, sched, S, T, concurrency=np.array([1e9]))
        caps[policy] = (st.cap, st.kv_cap_pairs)
    (mu, pairs), (ne, same) = caps["recompute"], caps["none"]
    assert pairs == same
    assert ne == pytest.approx(pairs / (80 * 516.75), rel=1e-9)
    assert mu == pytest.approx(pairs / (80 * 385.025), rel=1e-9)
    assert mu / ne == pytest.approx(1.3421, rel=1e-4)


def test_the_step_as_a_line_in_the_batch():
    # through (100, 30 ms) and (300, 50 ms): 20 ms more over 200 sequences is 0.1 ms a sequence, and 30 ms
    # less 100 x 0.1 ms is 20 ms at no batch
    a, b = mv.step_line(100.0, 0.030, 300.0, 0.050)
    assert (a, b) == (pytest.approx(0.020, rel=1e-12), pytest.approx(1e-4, rel=1e-12))
    with pytest.raises(mb.InvalidInputError, match="batches"):
        mv.step_line(100.0, 0.030, 100.0, 0.050)

    # one system in both scenarios on one chip: Interactive 1,000 tokens/s at 30 ms is 30 decoding (Little),
    # Server 2,000 at 60 ms is 120. Measured: 30 ms more over 90 sequences = 333.3 us a sequence, 30 ms less
    # 30 x 333.3 us = 20 ms at none; the model's 25 and 40 ms there: 15 ms / 90 = 166.7 us, 25 - 5 = 20 ms
    def row(sc, tok_s, tpot, model):
        return mrows.MLPerfRow(f"v5.1/X/sysA/llama2-70b-99/{sc}", "v5.1", "llama2-70b", sc, "H200", "h200", "tensorrt-llm",
                            mb.Quantization("fp8", "fp8"), 8, tok_s, tp=1, layout="tp1", tpot_p50_s=tpot,
                            pred={"tpot_at_batch_s": model})
    got = mv.step_lines([row("Interactive", 1000.0, 0.030, 0.025), row("Server", 2000.0, 0.060, 0.040)])
    assert got[1] == "  v5.1  H200           llama2-70b      1 systems    20.0   333.3 |   20.0   166.7 | 30 / 120"
    # batches within a quarter of each other make no line; a system in one scenario makes none
    assert len(mv.step_lines([row("Interactive", 1000.0, 0.030, 0.025), row("Server", 1100.0, 0.030, 0.026)])) == 1
    assert len(mv.step_lines([row("Interactive", 1000.0, 0.030, 0.025)])) == 1


def _ungraphed_gens(value, kernels=10, launch=5e-6, priced=True) -> dict:
    block = {"value": value, "priced": priced, "source": "harness: no CUDA graph", "kernels_per_layer": {"value": kernels},
             "launch_s": {"value": launch}}
    return {"g": {**GENS["g"], "cuda_graphs": block}}


def test_a_generation_without_cuda_graphs_pays_its_launches_every_step():
    # 10 kernels a decoder layer x 5 us a launch = 50 us a layer, on every device, a batch-1 step too
    rt = mrows.generation_runtime("g", "v9", generations=_ungraphed_gens(False))
    assert rt.served.ungraphed_layer_s == pytest.approx(10 * 5e-6, rel=1e-12)
    assert rt.no_graph_replay.all_devices and "no CUDA graph" in rt.no_graph_replay.evidence
    # graphs replayed (value true) is the generation without the block: no launches, no rule
    graphed = mrows.generation_runtime("g", "v9", generations=_ungraphed_gens(True))
    assert graphed == mrows.generation_runtime("g", "v9", generations=GENS)
    assert (graphed.served.ungraphed_layer_s, graphed.no_graph_replay) == (0.0, None)
    # a form measured and not chosen (priced false) leaves the engine's costs as they are
    assert mrows.generation_runtime("g", "v9", generations=_ungraphed_gens(False, priced=False)) == graphed

    def step_s(runtime, batch):
        return 1 / mb.estimate("llama-3.1-8b", "h100-sxm", runtime=runtime, batch=batch, prompt_tokens=0,
                               output_tokens=1, weight_dtype="fp8").decode_tok_s_per_user
    # Llama-3.1-8B's 32 layers x 50 us = 1.6 ms more a step, whatever the batch (the launches are the kernels'
    # count, not their size)
    for batch in (1, 64):
        assert step_s(rt, batch) - step_s(graphed, batch) == pytest.approx(32 * 10 * 5e-6, rel=1e-6)
    # the served step (mlperf_validate's TPOT at a decoding batch): each decode step pays it once
    bench = mrows.load_benchmarks()["llama3.1-8b"]
    tpot = []
    for runtime in (graphed, rt):
        sm, sched, _ = build("llama-3.1-8b", "h100-sxm", prompt=bench.prompt, output=bench.output,
                             quantization=mb.Quantization("fp8", "fp8"), runtime=runtime)
        tpot.append(mv.tpot_at_batch(sm, sched, bench, 64.0))
    assert tpot[1] - tpot[0] == pytest.approx(32 * 10 * 5e-6, rel=0.02)


@pytest.mark.parametrize("gens", [_ungraphed_gens("no"), _ungraphed_gens(False, priced=None), _ungraphed_gens(False, launch=0.0),
                                  _ungraphed_gens(False, kernels=0), _ungraphed_gens(False, launch=2e-3)])
def test_a_cuda_graphs_block_names_its_value_and_a_positive_launch_cost(gens):
    with pytest.raises(mb.InvalidInputError, match="cuda_graphs"):
        mrows.generation_runtime("g", "v9", generations=gens)


def test_a_served_launch_cost_needs_the_devices_it_applies_on():
    # served.ungraphed_layer_s without a no_graph_replay rule would price launches nowhere said
    trt = mb.load_runtime("tensorrt-llm").model_dump()
    trt["served"]["ungraphed_layer_s"] = 5e-5
    with pytest.raises(ValueError, match="no_graph_replay"):
        mb.Runtime.model_validate(trt)


def _two_constants():
    # a generation whose rounds from v5.1 on fit an fp8 rate, earlier ones a per-sequence cost
    # (helper mlperf19's form G1, data/reference/mlperf/README.md)
    return {"engine": "tensorrt-llm", "executor": "cpp", "served": {},
            "fit": {"per_sequence_s": {"unit": "s", "prior": [1e-7, 1e-3]},
                    "fp8_rate": {"unit": "factor", "prior": [1.0, 1.733], "from": "v5.1"}},
            "rounds": {"v4.0": {"per_sequence_s": {"value": 4e-5}}, "v4.1": {"per_sequence_s": {"value": 2.5e-5}},
                       "v5.1": {"fp8_rate": {"value": 1.4}}}}


def test_a_round_fits_the_constant_its_software_changed():
    # one constant a round: the one whose `from` is the latest at or before it (none: from the first round)
    g = _two_constants()
    assert [mrows.fitted_param(g, r) for r in ("v3.1", "v4.1", "v5.1", "v6.0")] == \
        ["per_sequence_s", "per_sequence_s", "fp8_rate", "fp8_rate"]
    assert mrows.fitted_param(g) == "per_sequence_s"        # without a round: the one with no `from`
    for bad in ({"fit": {"a": {"from": "v5.1"}, "b": {"from": "v5.1"}}}, {"fit": {"a": {"from": "v5.1"}}}):
        with pytest.raises(mb.InvalidInputError):
            mrows.fitted_param(bad, "v4.1")


def test_each_constant_carries_from_its_own_latest_round():
    # v5.1 runs its own fp8 rate beside v4.1's per-sequence cost; v6.0 carries both; v4.0 runs its own cost
    # and no fp8 rate (the served block's 0: every format at compute_fraction)
    g = _two_constants()
    assert [mrows.carried(g, r, "per_sequence_s") for r in ("v3.1", "v4.0", "v5.1", "v6.0")] == ["", "v4.0", "v4.1", "v4.1"]
    assert [mrows.carried(g, r, "fp8_rate") for r in ("v4.1", "v5.1", "v6.1")] == ["", "v5.1", "v5.1"]
    assert mrows.carried(g, "v6.0") == "v5.1"               # any constant: the latest round with a fit
    runs = {r: mrows.generation_runtime("gen", r, None, {"gen": g}).served for r in ("v4.0", "v5.1", "v6.0")}
    assert [(s.per_sequence_s, s.fp8_rate) for s in runs.values()] == [(4e-5, 0.0), (2.5e-5, 1.4), (2.5e-5, 1.4)]
    # cold for a fit of one constant: the other's rounds stand
    assert mv.without(g, "fp8_rate")["rounds"] == {k: v for k, v in g["rounds"].items() if k != "v5.1"}
    assert mv.without(g, "per_sequence_s")["rounds"] == {"v5.1": {"fp8_rate": {"value": 1.4}}}


def test_fits_run_round_by_round(monkeypatch):
    # fit_all fits the rounds in order, and a later round's fit of another constant runs the earlier rounds'
    # interior fits (v5.1's fp8 rate beside v4.1's per-sequence cost just fitted), an at-bound fit not
    from types import SimpleNamespace
    g = {**_two_constants(), "rounds": {}}
    seen = {}

    def fake(rows, name, rnd, generations=None, **_):
        seen[rnd] = mrows.generation_runtime(name, rnd, None, generations).served.per_sequence_s
        value = {"v4.0": 3e-5, "v4.1": 2e-5, "v5.1": 1.3}[rnd]
        return SimpleNamespace(rows=[], params={mrows.fitted_param(g, rnd): value}, at_bounds=rnd == "v4.1")
    monkeypatch.setattr(mv, "fit_generation", fake)
    rows = [SimpleNamespace(round=r, engine="tensorrt-llm", executor="cpp", id="x", device="h200")
            for r in ("v5.1", "v4.0", "v4.1")]
    out = mv.fit_all(rows, {"gen": g})
    assert list(out) == [("gen", "v4.0"), ("gen", "v4.1"), ("gen", "v5.1")]
    # v4.1's own fit is on its bound, so v5.1's runs v4.0's 3e-5; the shipped dict is not written
    assert seen == {"v4.0": 0.0, "v4.1": 3e-5, "v5.1": 3e-5} and g["rounds"] == {}
