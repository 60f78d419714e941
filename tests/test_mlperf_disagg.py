"""MLPerf rows whose published launch is disaggregated (NVIDIA's GB200 x72 Interactive systems behind
Dynamo): the launch facts as loaded (submissions.yaml, cited there), the pools they build, and the
open-loop two-pool search that predicts them."""
import pandas as pd
import pytest

import membound as mb
from membound.errors import InvalidInputError
from membound.fidelity import mlperf_rows as mrows
from membound.fidelity import mlperf_validate as mv
from membound.serving import Scheduler


def _rows(prefix: str, benchmark: str) -> list:
    """The loaded rows whose id starts with `prefix`, of `benchmark` ('': every benchmark)."""
    rows, _ = mrows.load_rows()
    return [r for r in rows if r.id.startswith(prefix) and benchmark in ("", r.benchmark)]


def test_the_published_pools_of_nvidias_gb200_x72_interactive_rows():
    # DeepSeek-R1 v6.0: '2 CTX DEP4 + 4 GEN DEP16 = 8 + 64 = 72 GPUs' (x72/Interactive/deepseek-r1.py); context
    # workers 128 sequences and 12,288 tokens a rank, no chunked prefill; generation workers 64 a rank, 6,144 tokens
    nv = {r.scenario: r for r in _rows("v6.0/NVIDIA/GB200-NVL72_GB200-186GB_aarch64x72", "deepseek-r1")}
    launch = nv["Interactive"].launch
    assert launch.context == mb.serving.Pool(2, 4, mb.Parallel(ep=4), Scheduler(max_running=128, token_budget=12288,
                                                                                  chunked_prefill=False))
    assert launch.generation == mb.serving.Pool(4, 16, mb.Parallel(ep=16), Scheduler(max_running=64, token_budget=6144))
    assert launch.executor == "pytorch"
    assert nv["Offline"].launch is None and nv["Server"].launch is None      # aggregated instances
    # gpt-oss-120b: 24 one-GPU context workers + 12 generation workers of tensor 4 x expert 4 = 24 + 48 = 72
    g = {r.scenario: r for r in _rows("v6.0/NVIDIA/GB200-NVL72_GB200-186GB_aarch64x72", "gpt-oss-120b")}["Interactive"]
    assert (g.launch.context.workers, g.launch.context.n_chips, g.launch.generation.workers,
            g.launch.generation.n_chips) == (24, 1, 12, 4)
    # llama2-70b 28 + 44 one-GPU workers; llama3.1-405b 14 x tensor 4 + 2 x tensor 8 = 56 + 16
    for bench, pools in (("llama2-70b", (28, 1, 44, 1)), ("llama3.1-405b", (14, 4, 2, 8))):
        r = [r for r in _rows("v6.0/NVIDIA/GB200-NVL72_GB200-186GB_aarch64x72", bench) if r.scenario == "Interactive"]
        c, d = r[0].launch.context, r[0].launch.generation
        assert (c.workers, c.n_chips, d.workers, d.n_chips) == pools
        assert c.workers * c.n_chips + d.workers * d.n_chips == 72
    # v6.0's llama2-70b and 405b Server rows ran the same pools (their own caps): 44 generation workers of 1,024
    # sequences; 2 of 1,280 (x8/Server/disagg_decode/llama3_1-405b.yaml); their DeepSeek-R1 and gpt-oss Server rows
    # are aggregated instances
    server = {r.benchmark: r for r in _rows("v6.0/NVIDIA/GB200-NVL72_GB200-186GB_aarch64x72", "") if r.scenario == "Server"}
    assert server["llama2-70b"].launch.generation == mb.serving.Pool(44, 1, mb.Parallel(tp=1),
                                                                     Scheduler(max_running=1024, token_budget=1024))
    assert server["llama3.1-405b"].launch.generation.scheduler.max_running == 1024     # the batch is at most the budget
    assert server["deepseek-r1"].launch is None and server["gpt-oss-120b"].launch is None
    # Google's v6.1 GB200 x72 DeepSeek-R1 Interactive row: no configuration read, so no disaggregated launch
    google = [r for r in _rows("v6.1/Google/GB200", "deepseek-r1") if r.scenario == "Interactive"]
    assert google and google[0].launch is None


def test_a_system_smaller_than_the_pools_is_skipped(tmp_path):
    df = pd.read_csv(mrows.mlperf_csv())
    pick = (df["round"] == "v6.0") & (df.submitter == "NVIDIA") & (df.benchmark == "deepseek-r1") \
        & (df.scenario == "Interactive") & df.system_name.str.contains("x72")
    assert pick.sum() == 1
    df.loc[pick, "n_accelerators"] = 8
    df.to_csv(tmp_path / "mlperf_llm.csv", index=False)
    rows, skipped = mrows.load_rows(tmp_path / "mlperf_llm.csv")
    why = [w for i, w, _ in skipped if i.startswith("v6.0/NVIDIA/GB200-NVL72_GB200-186GB_aarch64x72_TRT/deepseek-r1/Int")]
    assert why == ["its disaggregated launch spans 72 accelerators, the system 8"]


def test_a_launch_pool_is_checked():
    with pytest.raises(InvalidInputError, match="workers"):
        mrows.launch_pool("x", {"tp": 1, "max_running": 8, "token_budget": 64})
    with pytest.raises(InvalidInputError, match="fields among"):
        mrows.launch_pool("x", {"workers": 1, "max_running": 8, "token_budget": 64, "dp": 2})
    # a step's decodes take a token each: the batch is at most the budget (TensorRT-LLM's micro-batch scheduler)
    assert mrows.launch_pool("x", {"workers": 3, "tp": 2, "max_running": 1024, "token_budget": 512}).scheduler \
        == Scheduler(max_running=512, token_budget=512)
    entry = {"d": {"round": "v6.0", "submitters": ["X"], "benchmark": "b", "engine": "e", "device": "c",
                   "scenarios": {"Interactive": {"context": {"workers": 1, "max_running": 8, "token_budget": 64}}}}}
    with pytest.raises(InvalidInputError, match="both a context and a generation pool"):
        mrows.submission_of("v6.0", "X", "b", "e", "c", "Interactive", 4, entries=entry)


def test_the_disaggregated_row_is_the_two_pool_search():
    # the caps are per rank (TensorRT-LLM's rank_limits): a DeepSeek-R1 generation worker of 16 attention-DP
    # ranks runs 64 x 16 = 1,024 sequences and 6,144 x 16 = 98,304 tokens a step; a context worker 128 x 4 = 512
    # and 12,288 x 4 = 49,152
    row = [r for r in _rows("v6.0/NVIDIA/GB200-NVL72_GB200-186GB_aarch64x72", "deepseek-r1") if r.scenario == "Interactive"]
    b = mrows.load_benchmarks()["deepseek-r1"]
    runtime = mrows.launched(mrows.runtime_of("tensorrt-llm", "pytorch", "v6.0"), row[0].launch, "gb200")
    pools, _ = mv.build_pools(b.preset, "gb200", row[0].launch.context, row[0].launch.generation, prompt=b.prompt,
                              output=b.output, quantization=row[0].quantization, runtime=runtime,
                              speculative=mv.mtp(b.preset, 3))
    assert (pools.sched_d.max_running, pools.sched_d.token_budget) == (1024, 98304)
    assert (pools.sched_p.max_running, pools.sched_p.token_budget) == (512, 49152)
    assert pools.chips == 72 and pools.sm_d.tokens_per_step > 1.0      # MTP drafts accepted on the decode pool
    [r] = mv.predict([row[0].fresh()])
    assert r.tp == 72 and r.layout.startswith("context 2 x") and "generation 4 x" in r.layout
    mr = mv.search_disaggregated(pools, b.prompt, b.output, b.limits["Interactive"])
    assert r.pred["tok_s_per_accel"] == pytest.approx(mr.rate * b.output.mean / 72, rel=1e-12)
    assert r.pred["ttft_p99_s"] <= 1.5 and r.pred["tpot_p99_s"] <= 0.015     # within the Interactive limits
