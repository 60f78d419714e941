"""membound.fidelity.mlperf_rows: rows NVIDIA's harness serves from a trtllm-serve endpoint (DeepSeek-R1,
gpt-oss-120b, v6.x's PyTorch-backend llama rows): the generation tensorrt-llm-serve, the per-round caps of
workloads.yaml `engine_limits`, and submissions' own TensorRT-LLM launches (submissions.yaml)."""
import pandas as pd
import pytest

import membound as mb
from membound.catalog.runtime import Served
from membound.fidelity import mlperf_rows as mrows

ENGINE = Served(max_running=2048, token_budget=8192, dp_balance_steps=60)


def test_trtllm_serve_rows_run_the_harness_scheduler_and_the_engines_costs():
    g = mrows.load_generations()["tensorrt-llm-serve"]
    assert (g["engine"], g["executor"]) == ("tensorrt-llm", "pytorch")
    assert mrows.EXECUTORS["tensorrt-llm"]["pytorch"] == "tensorrt-llm-serve"
    # the harness's batch_scheduler_policy max_util -> MAX_UTILIZATION in every round's configuration (code)
    assert {k: v["status"] for k, v in g["served"].items()} == {"preemption": "code"}
    eng = mb.load_runtime("tensorrt-llm").served
    assert eng.preemption == "none"           # the served block's GUARANTEED_NO_EVICT
    for rnd in ("v5.1", "v6.0", "v6.1"):
        rt = mrows.runtime_of("tensorrt-llm", "pytorch", rnd)
        assert rt.name == f"tensorrt-llm-serve-mlperf-{rnd}" and rt.served.preemption == "recompute"
        # no fit family ran these rows through trtllm-serve: every cost is the engine's as it stands
        s = rt.served
        assert (s.per_sequence_s, s.compute_fraction, s.per_request_s, s.per_layer_s, s.dp_balance_steps) == \
            (eng.per_sequence_s, eng.compute_fraction, eng.per_request_s, eng.per_layer_s, eng.dp_balance_steps)
    assert g["rounds"] == {} and g["at_bound"] == {}
    # the C++ executor's rows keep their own generation
    assert mrows.runtime_of("tensorrt-llm", "cpp", "v5.1").name == "tensorrt-llm-cpp-mlperf-v5.1"


def test_a_chip_may_list_its_caps_per_round():
    b = mrows.load_benchmarks()["deepseek-r1"]
    # NVIDIA's B200-SXM-180GBx8 Server: gpu_batch_size 512, max_num_tokens 3456, no chunked context in both
    # rounds; attention-DP balancing timeout 9 iterations in v5.1, 6 in v6.0; v6.1's configuration unread
    v51 = mrows.scenario_limits(b, "tensorrt-llm", "b200", "v5.1", "Server")
    v60 = mrows.scenario_limits(b, "tensorrt-llm", "b200", "v6.0", "Server")
    assert (v51.max_running, v51.token_budget, v51.chunked_prefill, v51.dp_balance_steps) == (512, 3456, False, 9)
    assert (v60.max_running, v60.token_budget, v60.chunked_prefill, v60.dp_balance_steps) == (512, 3456, False, 6)
    assert mrows.scenario_limits(b, "tensorrt-llm", "b200", "v6.1", "Server") is None
    # Offline: 4608 tokens a step, balancing timeout 500 on B200, 50 on GB200 (NVL72 x72)
    off = mrows.scenario_limits(b, "tensorrt-llm", "gb200", "v5.1", "Offline")
    assert (off.max_running, off.token_budget, off.dp_balance_steps) == (512, 4608, 50)
    # an entry without a balancing timeout leaves the engine's (None resolves to the served block's)
    lim = mrows._engine_limits("x", {"rounds": ["v1"], "max_running": 64, "token_budget": 2560})
    assert lim.scheduler().dp_balance_steps is None
    assert lim.scheduler().resolved(ENGINE).dp_balance_steps == 60


def test_a_round_in_two_entries_of_a_chip_is_refused():
    entry = {"rounds": ["v5.1"], "max_running": 512, "token_budget": 3456}
    assert len(mrows._device_limits("d", [entry, {**entry, "rounds": ["v6.0"]}])) == 2
    with pytest.raises(mb.InvalidInputError, match="one entry only"):
        mrows._device_limits("d", [entry, {**entry, "rounds": ["v6.0", "v5.1"]}])
    with pytest.raises(mb.InvalidInputError, match=r"d\[1\]"):
        mrows._device_limits("d", [entry, {"rounds": ["v6.0"]}])


def test_a_submissions_own_caps_stand_over_the_chips():
    b = mrows.load_benchmarks()["deepseek-r1"]
    # Nebius's v6.0 Server launch sets 640 sequences and 4608 tokens: it, not NVIDIA's 512 / 3456, bounds the step
    nebius = mrows.Launch("pytorch", max_running=640, token_budget=4608, chunked_prefill=False, dp_balance_steps=9)
    assert mrows.row_limits(b, "tensorrt-llm", "b200", "v6.0", "Server", nebius) is None
    # a launch without caps, or none: the chip's caps of the round
    chip = mrows.scenario_limits(b, "tensorrt-llm", "b200", "v6.0", "Server")
    assert mrows.row_limits(b, "tensorrt-llm", "b200", "v6.0", "Server", mrows.Launch("pytorch")) == chip
    assert mrows.row_limits(b, "tensorrt-llm", "b200", "v6.0", "Server", None) == chip


def test_a_tensorrt_llm_launch_without_chunked_context_still_mixes_prompts_and_decodes():
    got = mrows.Launch("pytorch", max_running=640, token_budget=4608, chunked_prefill=False,
                       dp_balance_steps=9).served(ENGINE)
    # in-flight batching puts whole prompts beside decodes in one step: mixed steps stay the engine's
    assert got == {"max_running": 640, "token_budget": 4608, "chunked_prefill": False, "dp_balance_steps": 9}
    # vLLM V0 without chunked prefill runs prompts or decodes a step
    assert mrows.Launch("harness", chunked_prefill=False).served(ENGINE)["mixed_steps"] is False
    rt = mrows.launched(mrows.runtime_of("tensorrt-llm", "pytorch", "v6.0"), mrows.Launch("pytorch", dp_balance_steps=9))
    assert rt.served.dp_balance_steps == 9 and rt.served.preemption == "recompute"


def test_nebius_b200_rows_read_their_launch(tmp_path):
    row = dict(round="v6.0", division="closed", submitter="Nebius", system_name="nebius_b200_n1",
               benchmark="gpt-oss-120b", model="gpt-oss-120b", scenario="Interactive", tokens_per_s=13000.0,
               accelerator="NVIDIA B200-SXM-180GB", accel_family="B200", accelerators_per_node=8, n_accelerators=8,
               tokens_per_s_per_accel=1625.0, framework="TensorRT 10.14, CUDA 13.1, cuDNN 9.17, TensorRT-LLM feat/1.2-mlpinf",
               software_stack="", precision="")
    path = tmp_path / "m.csv"
    pd.DataFrame([row, {**row, "submitter": "Other"}], columns=list(mrows.REQUIRED)).to_csv(path, index=False)
    (nebius, other), _ = mrows.load_rows(path)
    # gpu_batch_size 128 x 7 = 896 sequences, max_num_tokens 4638 x 3 = 13,914, one GPU an instance
    assert nebius.launch == mrows.Launch("pytorch", tp=1, max_running=896, token_budget=13914, chunked_prefill=True)
    assert nebius.executor == other.executor == "pytorch"        # gpt-oss: trtllm-serve whatever the stack says
    assert other.launch is None
    b = mrows.load_benchmarks()["gpt-oss-120b"]
    assert mrows.row_layouts(b, "tensorrt-llm", "b200", "v6.0", "mxfp4", 8, nebius.launch) == [mb.Parallel(tp=1)]


def test_offline_caps_bound_offline_only():
    # NVIDIA's v6.0 GB200 gpt-oss launches cap Offline (512 sequences, 13,914 tokens) but its Interactive rows run
    # disaggregated workers with their own caps (submissions.yaml pools), which engine_limits do not touch
    from dataclasses import replace

    from membound.fidelity import mlperf_validate as mv
    rows, _ = mrows.load_rows()
    mine = [r.fresh() for r in rows if r.id.startswith("v6.0/NVIDIA/GB200") and r.benchmark == "gpt-oss-120b"
            and r.scenario in ("Offline", "Interactive")]
    assert sorted(r.scenario for r in mine) == ["Interactive", "Offline"]
    shipped = mrows.load_benchmarks()
    b = shipped["gpt-oss-120b"]
    uncapped = {**shipped, "gpt-oss-120b": replace(b, engine_limits={})}
    capped = {r.scenario: r.pred["tok_s_per_accel"] for r in mv.predict([r.fresh() for r in mine], shipped)}
    free = {r.scenario: r.pred["tok_s_per_accel"] for r in mv.predict([r.fresh() for r in mine], uncapped)}
    assert capped["Offline"] != free["Offline"]
    assert capped["Interactive"] == free["Interactive"]


def test_an_instance_may_span_trays_of_one_scale_up_domain():
    b = mrows.load_benchmarks()["deepseek-r1"]
    gb200, h200 = mb.load_hardware("gb200"), mb.load_hardware("h200")
    # a GB200 NVL72 x72 system: 72 GPUs in one NVLink domain of 72, nodes (trays) of 4; an HGX H200 x16 system:
    # two nodes of 8, NVLink within each; a lone tray of 4: its 4
    assert (mrows.scale_up(gb200, 72, 4), mrows.scale_up(h200, 16, 8), mrows.scale_up(gb200, 4, 4)) == (72, 8, 4)
    assert mrows.scale_up(gb200, float("nan"), 4) == 4           # no accelerator count: the node
    # NVIDIA's GB200 x72 DeepSeek-R1 instance: tensor 8 x expert 8 over two 4-GPU trays of the NVL72 rack: the
    # row's node of 4 offers 8-chip layouts, tensor 8 or expert 8
    wide = mrows.instance_layouts(b, "tensorrt-llm", "gb200", "v6.0", "nvfp4", 4, 72)
    assert wide == [mb.Parallel(tp=8), mb.Parallel(ep=8)]
    # a round whose configuration was not read, or a system of one tray: the layout rule, groups dividing the node
    assert {lay.chips for lay in mrows.instance_layouts(b, "tensorrt-llm", "gb200", "v6.1", "nvfp4", 4, 72)} == {4}
    assert {lay.chips for lay in mrows.instance_layouts(b, "tensorrt-llm", "gb200", "v6.0", "nvfp4", 4, 4)} == {4}
    # B200 x8: one instance a node, the rule's widest group
    assert {lay.chips for lay in mrows.instance_layouts(b, "tensorrt-llm", "b200", "v5.1", "nvfp4", 8, 8)} == {8}
    # the rows as loaded carry their domain: NVIDIA's v6.0 GB200 x72 rows run 8-chip instances
    rows, _ = mrows.load_rows()
    nv = [r for r in rows if r.id.startswith("v6.0/NVIDIA/GB200") and r.benchmark == "deepseek-r1"]
    assert nv and {(r.per_node, r.domain) for r in nv} == {(4, 8)}
    # the instance it spans: 8 where the domain holds it, else 0 (the node); none published for v6.1
    assert mrows.wide_instance(b, "tensorrt-llm", "gb200", "v6.0", 4, 72) == 8
    assert mrows.wide_instance(b, "tensorrt-llm", "gb200", "v6.0", 4, 4) == 0
    assert mrows.wide_instance(b, "tensorrt-llm", "gb200", "v6.1", 4, 72) == 0
    assert mrows.wide_instance(b, "tensorrt-llm", "b200", "v6.0", 8, 8) == 0      # not wider than the node


def test_llama3_1_8b_trtllm_submissions_ran_trtllm_serve_as_their_launches_say():
    # v5.1 and v6.0: NVIDIA's instructions run llama3.1-8b with --core_type=trtllm_endpoint (trtllm-serve, PyTorch
    # backend), though the rows' stacks name only the TensorRT library, which the stack rule reads as a TensorRT
    # engine (cpp). The submission's launch (submissions.yaml) overrides the stack.
    b = mrows.load_benchmarks()["llama3.1-8b"]
    assert mrows.executor_of("tensorrt-llm", "TensorRT 10.11, CUDA 12.9", b) == "cpp"
    # NVIDIA's B200-SXM-180GBx8 and its partners' B200 configs: gpu_batch_size 6000, runtime max_num_tokens 12000
    launch, _ = mrows.submission_of("v5.1", "NVIDIA", "llama3.1-8b", "tensorrt-llm", "b200", "Offline", 8)
    assert (launch.executor, launch.tp, launch.max_running, launch.token_budget, launch.chunked_prefill) == \
        ("pytorch", 1, 6000, 12000, True)
    # QCT's D74U H200: 2048 / 1536; HPE's XD670 H200 sets 12000 tokens (its '#1536' commented out)
    qct, _ = mrows.submission_of("v5.1", "Quanta_Cloud_Technology", "llama3.1-8b", "tensorrt-llm", "h200", "Server", 8)
    hpe, _ = mrows.submission_of("v5.1", "HPE", "llama3.1-8b", "tensorrt-llm", "h200", "Server", 8)
    assert (qct.max_running, qct.token_budget) == (2048, 1536) and (hpe.max_running, hpe.token_budget) == (2048, 12000)
    # Cisco's C885 H200 publishes no llama3_1-8b config: the executor alone, the engine's own caps
    cisco, _ = mrows.submission_of("v5.1", "Cisco", "llama3.1-8b", "tensorrt-llm", "h200", "Offline", 8)
    assert cisco.executor == "pytorch" and not cisco.caps
    # the rows: every v5.1 and v6.0 TensorRT-LLM llama3.1-8b row runs tensorrt-llm-serve; v6.1's keep the stack rule
    rows, _ = mrows.load_rows()
    ex = {(r.round, r.executor) for r in rows if r.benchmark == "llama3.1-8b" and r.engine == "tensorrt-llm"}
    assert {e for rnd, e in ex if rnd in ("v5.1", "v6.0")} == {"pytorch"}
    assert mrows.runtime_of("tensorrt-llm", "pytorch", "v5.1").name == "tensorrt-llm-serve-mlperf-v5.1"


def test_v6_0_llama_trtllm_submissions_ran_what_their_published_code_runs():
    # v6.0 (mlgen18): llama2-70b / 405b ran trtllm-serve where the benchmark README of the submitter's published
    # code says --core_type=trtllm_endpoint; systems on TensorRT 10.11 (v5.1's container) ran v5.1's engines.
    stack14, stack11 = "TensorRT 10.14.1.48, CUDA 13.0", "TensorRT 10.11.0.33, CUDA 13.0"
    # Dell's XE7740 H200 NVL (a fit family): Offline and Server gpu_batch_size 2048, max_num_tokens 1536;
    # Interactive 256 / 256; one GPU an instance
    off, _ = mrows.submission_of("v6.0", "Dell", "llama2-70b", "tensorrt-llm", "h200-nvl", "Offline", 8, stack=stack14)
    inter, _ = mrows.submission_of("v6.0", "Dell", "llama2-70b", "tensorrt-llm", "h200-nvl", "Interactive", 8,
                                   stack=stack14)
    assert (off.executor, off.tp, off.max_running, off.token_budget, off.chunked_prefill) == ("pytorch", 1, 2048, 1536, True)
    assert (inter.max_running, inter.token_budget) == (256, 256)
    # HPE ran two containers on RTX PRO 6000: the TensorRT 10.14 systems the endpoint (their batch differs between
    # systems: no caps), the 10.11 ones no entry (the stack rule: a TensorRT engine)
    hpe14, _ = mrows.submission_of("v6.0", "HPE", "llama2-70b", "tensorrt-llm", "rtx-pro-6000-blackwell", "Offline", 4,
                                   stack=stack14)
    assert hpe14.executor == "pytorch" and not hpe14.caps
    assert mrows.submission_of("v6.0", "HPE", "llama2-70b", "tensorrt-llm", "rtx-pro-6000-blackwell", "Offline", 2,
                               stack=stack11) == (None, {})
    # Google's B200 405B: Offline tensor 2, 128 sequences, 1536 tokens; Server tensor 4, 256, 2048
    g_off, _ = mrows.submission_of("v6.0", "Google", "llama3.1-405b", "tensorrt-llm", "b200", "Offline", 8, stack=stack14)
    g_srv, _ = mrows.submission_of("v6.0", "Google", "llama3.1-405b", "tensorrt-llm", "b200", "Server", 8, stack=stack14)
    assert (g_off.tp, g_off.max_running, g_off.token_budget) == (2, 128, 1536)
    assert (g_srv.tp, g_srv.max_running, g_srv.token_budget) == (4, 256, 2048)
    # the rows: mixtral, HPE's TensorRT 10.11 systems, Supermicro (its README builds engines) and Cisco (a TensorRT
    # 10.11 system) keep the C++ executor; the others named above run trtllm-serve
    rows, _ = mrows.load_rows()
    v60 = [r for r in rows if r.round == "v6.0" and r.engine == "tensorrt-llm"
           and r.benchmark in ("llama2-70b", "llama3.1-405b", "mixtral-8x7b") and r.family != "GB200"]
    cpp = {(r.benchmark, r.id.split("/")[1]) for r in v60 if r.executor == "cpp"}
    serve = {(r.benchmark, r.id.split("/")[1]) for r in v60 if r.executor == "pytorch"}
    assert cpp == {("llama2-70b", "HPE"), ("llama2-70b", "Cisco"), ("llama2-70b", "Supermicro"), ("mixtral-8x7b", "HPE")}
    assert serve == {("llama2-70b", s) for s in ("Dell", "ASUSTeK", "HPE", "Lenovo")} | {("llama3.1-405b", "Google")}
    # v6.1: Cisco's published llama3.1-8b README runs the endpoint; TTA's and HPE's rows keep the stack rule
    v61 = {(r.id.split("/")[1], r.executor) for r in rows if r.round == "v6.1" and r.benchmark == "llama3.1-8b"
           and r.engine == "tensorrt-llm" and r.family == "RTX-PRO-6000"}
    assert v61 == {("Cisco", "pytorch"), ("TTA", "cpp"), ("HPE", "cpp")}
    assert all("TRT_10_11" in r.id for r in v60 if r.executor == "cpp" and r.id.split("/")[1] == "HPE"
               and "RTX" in r.id and r.benchmark == "llama2-70b")
