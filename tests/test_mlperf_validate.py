"""membound.fidelity.mlperf_validate: MLPerf rows as served workloads (loader rules, skips, predictions)."""
import pandas as pd
import pytest

import membound as mb
from membound.fidelity import mlperf_validate as mv
from membound.planning.rate_search import saturation
from membound.serving import build

from _cli import run_cli

COLUMNS = list(mv.REQUIRED) + ["accel_variant"]


def _row(**kw):
    base = dict(round="v5.1", division="closed", submitter="X", system_name="sys", benchmark="llama3.1-8b",
                model="llama3.1-8b", scenario="Offline", tokens_per_s=8000.0, accelerator="NVIDIA H100-SXM-80GB",
                accel_family="H100", accel_variant="H100-SXM", accelerators_per_node=8, n_accelerators=8,
                tokens_per_s_per_accel=1000.0, framework="TensorRT 10.11, CUDA 12.9", software_stack="",
                precision="weights=fp8; inputs=int32; transform=quantization")
    base.update(kw)
    return base


def test_length_distribution_keeps_its_mean_and_bounds():
    d = mv.length_distribution(294.45, 2, 1024, 0.9)
    assert d.mean == pytest.approx(294.45, abs=1.0)      # whole tokens: within a token of the mean
    assert min(d.values) >= 2 and max(d.values) <= 1024 and len(d.values) == mv.LENGTH_POINTS
    with pytest.raises(mb.InvalidInputError):
        mv.length_distribution(2000, 2, 1024, 0.9)


def test_shipped_workloads_cite_every_benchmark():
    b = mv.load_benchmarks()
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
    got, skipped = mv.load_rows(path)
    assert [(r.benchmark, r.scenario) for r in got] == [("llama3.1-8b", "Offline"), ("llama3.1-8b", "Server"),
                                                        ("gptj", "Offline")]
    reasons = sorted(why for _, why, _ in skipped)
    assert reasons == sorted(["open division", "scenario SingleStream not modelled", "no profile for Acme",
                              "no runtime for the software stack",
                              "qwen3-vl-235b-a22b: image inputs (a vision encoder per request), not modelled"])
    off = got[0]
    mv.predict(got)
    assert (off.device, off.engine, off.tp, off.quantization.weights) == ("h100-sxm", "tensorrt-llm", 1, "fp8")
    bench = mv.load_benchmarks()["llama3.1-8b"]
    sm, sched, _ = build("llama-3.1-8b", "h100-sxm", prompt=bench.prompt, output=bench.output,
                         quantization=off.quantization, runtime="tensorrt-llm")
    # Offline: the saturated engine's output tokens per second over its one accelerator
    assert off.pred["tok_s_per_accel"] == pytest.approx(saturation(sm, sched, bench.prompt, bench.output)
                                                        * bench.output.mean, rel=1e-9)
    srv = got[1].pred
    assert 0 < srv["tok_s_per_accel"] < off.pred["tok_s_per_accel"]       # within limits: below saturation
    assert srv["ttft_p99_s"] <= 2.0 + 1e-9 and srv["tpot_p99_s"] <= 0.1 + 1e-9
    # gptj: beam search of 4 (workloads.yaml), 69 tokens a sample (mlperf.conf's scaling factor)
    gj = mv.load_benchmarks()["gptj"]
    assert gj.beams == 4 and gj.limits["Server"] == {"e2e_p99_s": 20.0} and gj.output.mean == pytest.approx(69, abs=1)
    sm, sched, _ = build("gpt-j-6b", "h100-sxm", prompt=gj.prompt, output=gj.output, quantization=got[2].quantization,
                         runtime="tensorrt-llm", n_chips=got[2].tp)
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
    assert mv.weight_format("weights=fp16; inputs=int32; transform=quantization, affine fusion", h100, "v4.1") == "fp8"
    assert mv.weight_format("weights=fp4", mi300, "v5.1") == "mxfp4"
    assert mv.weight_format("nan", h100, "v4.0") == "fp8"
    # Llama-2-70B (68.98e9 parameters): in bf16 137.95 GB, 68.98 GB a chip over two H100s, within
    # 85% of 85.52e9 B = 72.69 GB (one chip would hold 137.95: no); in fp8 68.98 GB fit one; a node
    # of 2 leaves only groups of 1 and 2
    assert mv.layouts("llama-2-70b", "h100-sxm", "bf16", 8) == [mb.Parallel(tp=n) for n in (2, 4, 8)]
    assert mv.layouts("llama-2-70b", "h100-sxm", "fp8", 2) == [mb.Parallel(tp=1), mb.Parallel(tp=2)]
    # a MoE model also runs expert parallel with data-parallel attention
    assert mb.Parallel(ep=8) in mv.layouts("mixtral-8x7b", "h100-sxm", "fp8", 8)
    assert mv.engine_of("vLLM 0.9.0, PyTorch 2.7.0") == "vllm" and mv.engine_of("PyTorch") is None


def test_reference_path_errors(tmp_path):
    with pytest.raises(mb.InvalidInputError):
        mv.mlperf_csv(tmp_path)
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n")
    with pytest.raises(mb.InvalidInputError, match="missing"):
        mv.load_rows(bad)


def test_generations_fall_back_and_need_two_chips():
    # no runtime file for a round: the engine's own runtime; a fit needs rows on two chips at least
    assert mv.generation("tensorrt-llm", "v0.1") == "tensorrt-llm"
    q = mb.Quantization("fp8", "fp8")
    one_chip = [mv.MLPerfRow(f"v5.1/X/s{i}/llama3.1-8b/Offline", "v5.1", "llama3.1-8b", "Offline", "H200", "h200",
                             "tensorrt-llm", q, 8, 1000.0) for i in range(3)]
    assert mv.fit_generation(one_chip, "tensorrt-llm", "v5.1") is None


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
            _row(**cpu, host_processor="Acme CPU 9000", precision="weights=INT8", system_desc="")]
    path = tmp_path / "cpu.csv"
    pd.DataFrame(rows, columns=cols).to_csv(path, index=False)
    got, skipped = mv.load_rows(path)
    assert [(r.device, r.engine, r.per_node, r.quantization.weights) for r in got] == [
        ("xeon-6980p", "device", 2, "int8"), ("xeon-platinum-8480p", "device", 2, "int4")]
    assert got[0].measured == pytest.approx(800.0 / 2) and got[0].family == "CPU-only"
    assert [why for _, why, _ in skipped] == ["no profile for the CPU Acme CPU 9000"]
