"""membound.fidelity.mlperf_rows: vLLM rows as their submissions launched them (submissions.yaml,
`Launch`, `submission_of`, the generation vllm-harness)."""
import pandas as pd
import pytest

import membound as mb
from membound.catalog.runtime import Served
from membound.fidelity import mlperf_rows as mrows
from membound.physics.efficiency import efficiency

ENGINE = Served(max_running=1024, token_budget=8192, per_sequence_s=3.3e-5, memory_fraction=0.9)

ENTRIES = {
    "e": {"round": "v5.1", "submitters": ["Acme", "Bolt"], "benchmark": "llama2-70b", "engine": "vllm",
          "device": "mi300x", "formats": {"weights": "fp8", "kv": "fp8"},
          "scenarios": {"Offline": {"executor": "harness", "tp": "all", "max_running": 1792},
                        "Server": {"executor": "server", "tp": 2, "pp": 2, "kv": "bf16"}}},
}


def test_a_launch_sets_the_engine_flags_it_names():
    launch = mrows.Launch("harness", tp=1, max_running=1792, token_budget=40960, chunked_prefill=False,
                       memory_fraction=0.98, scheduler_steps=11)
    got = launch.served(ENGINE)
    # multi-step scheduling: the scheduler runs once per 11 steps, so 3.3e-5 s per sequence per call is
    # 3.3e-5 / 11 = 3.0e-6 s per step, and waiting prompts join every 11th step
    assert got["per_sequence_s"] == pytest.approx(3.0e-6, rel=1e-12)
    assert got["recv_interval_steps"] == 11
    # 1792 sequences fit a 40,960-token step (one token each): the cap stays; no chunked prefill, no mixed steps
    assert (got["max_running"], got["token_budget"], got["memory_fraction"]) == (1792, 40960, 0.98)
    assert got["chunked_prefill"] is False and got["mixed_steps"] is False
    # nothing named, nothing set: the engine's own flags
    assert mrows.Launch("server").served(ENGINE) == {}


def test_a_step_decodes_at_most_its_token_budget():
    # Intel's Arc launch: 1024 sequences but 320 tokens a step: at most 320 sequences decode a step
    assert mrows.Launch("harness", max_running=1024, token_budget=320).served(ENGINE)["max_running"] == 320
    # a budget alone below the engine's 1024 sequences caps them too: min(1024, 192) = 192
    assert mrows.Launch("harness", token_budget=192).served(ENGINE) == {"token_budget": 192, "max_running": 192}
    # a budget above the engine's sequences leaves them: min(1024, 4096) = 1024, not set
    assert mrows.Launch("harness", token_budget=4096).served(ENGINE) == {"token_budget": 4096}


def test_launched_runtime_applies_the_launch_and_none_is_the_engine():
    rt = mb.load_runtime("vllm")
    assert mrows.launched(rt, None) is rt and mrows.launched("vllm", None) == "vllm"
    got = mrows.launched("vllm", mrows.Launch("harness", max_running=650, scheduler_steps=9))
    assert got.served.max_running == 650 and got.served.recv_interval_steps == 9
    assert got.served.per_sequence_s == pytest.approx(rt.served.per_sequence_s / 9, rel=1e-12)
    assert got.served.compute_fraction == rt.served.compute_fraction      # the GEMM share is the engine's


def test_a_launch_with_tuned_gemms_multiplies_at_their_rate_and_adds_reads():
    # a submission whose tuned GEMMs' table gives 0.411 of the dense peak, on a chip whose profile achieves 0.514:
    # the served share is 0.411 / 0.514 = 0.79961 (so the step multiplies at 0.79961 x 0.514 = 0.411 of the
    # peak), and reads and multiplies add (overlap 0)
    got = mrows.Launch("harness", gemm_fraction=0.411).served(ENGINE, 0.514)
    assert got == {"compute_fraction": pytest.approx(0.79961, abs=1e-5), "overlap": 0.0}
    with pytest.raises(mb.InvalidInputError, match="gemm_fraction"):
        mrows.Launch("harness", gemm_fraction=0.6).served(ENGINE, 0.514)      # above what the chip achieves
    with pytest.raises(mb.InvalidInputError, match="gemm_fraction"):
        mrows.Launch("harness", gemm_fraction=0.411).served(ENGINE)           # no chip to take the share of


def test_a_tuned_gemm_step_prices_each_sequence_at_the_table_rate():
    from membound.serving.api import build
    from membound.serving.lengths import Fixed
    rt = mrows.launched("vllm", mrows.Launch("harness", gemm_fraction=0.411), "mi300x")
    q = mb.Quantization("fp8", "fp8", activations="fp8")
    sm, _, _ = build("llama-2-70b", "mi300x", prompt=Fixed(222), output=Fixed(294), quantization=q, runtime=rt,
                     n_chips=1, parallel=mb.Parallel(tp=1))
    assert sm.eff.compute_fraction == pytest.approx(0.411, rel=1e-12) and sm.eff.overlap == 0.0
    # each decoding sequence adds its GEMMs: Llama-2-70B's 68,976,648,192 parameters less the 32,000 x 8,192 input
    # embedding (a lookup) = 68,714,504,192, x 2 FLOPs = 1.37429e11 FLOPs, at 0.411 x 2.6149e15 = 1.07472e15
    # FLOP/s: 1.27874e-4 s a sequence
    one, _, _ = sm.staged(1.0)
    many, _, _ = sm.staged(1001.0)
    assert (float(many.comp) - float(one.comp)) / 1000.0 == pytest.approx(1.27874e-4, rel=1e-4)
    # overlap 0: the step is its reads plus its multiplies (plus the fixed costs), not the larger of them
    u = 1000.0
    parts = many.mem + many.kv * 1001.0 * u + many.comp + many.attn * 1001.0 * u + many.over + many.comm
    assert float(sm.step(1001.0, u)) == pytest.approx(float(parts), rel=1e-12)
    assert float(parts) > float(many.mem + many.kv * 1001.0 * u) and float(parts) > float(many.comp)


def test_an_entrys_gemm_fraction_holds_for_each_scenario_unless_one_overrides_it():
    e = {**ENTRIES["e"], "gemm_fraction": 0.4,
         "scenarios": {"Offline": {"executor": "harness"}, "Server": {"executor": "harness", "gemm_fraction": 0.3}}}
    off, _ = mrows.submission_of("v5.1", "Acme", "llama2-70b", "vllm", "mi300x", "Offline", 8, {"e": e})
    srv, _ = mrows.submission_of("v5.1", "Acme", "llama2-70b", "vllm", "mi300x", "Server", 8, {"e": e})
    assert (off.gemm_fraction, srv.gemm_fraction) == (0.4, 0.3)


def test_submission_of_matches_round_submitter_benchmark_and_chip():
    launch, fmt = mrows.submission_of("v5.1", "Bolt", "llama2-70b", "vllm", "mi300x", "Offline", 8, ENTRIES)
    assert launch == mrows.Launch("harness", tp=8, max_running=1792)        # tp "all": the node's 8 devices
    assert fmt == {"weights": "fp8", "kv": "fp8"}
    launch, fmt = mrows.submission_of("v5.1", "Acme", "llama2-70b", "vllm", "mi300x", "Server", 8, ENTRIES)
    assert (launch.executor, launch.tp, launch.pp) == ("server", 2, 2)
    assert fmt == {"weights": "fp8", "kv": "bf16"}                        # the scenario's own KV wins
    for args in (("v4.1", "Acme", "llama2-70b", "vllm", "mi300x"), ("v5.1", "Zed", "llama2-70b", "vllm", "mi300x"),
                 ("v5.1", "Acme", "mixtral-8x7b", "vllm", "mi300x"), ("v5.1", "Acme", "llama2-70b", "sglang", "mi300x"),
                 ("v5.1", "Acme", "llama2-70b", "vllm", "h100-sxm")):
        assert mrows.submission_of(*args, "Offline", 8, ENTRIES) == (None, {})
    # a scenario the entry does not list keeps its formats, no launch
    assert mrows.submission_of("v5.1", "Acme", "llama2-70b", "vllm", "mi300x", "Interactive", 8, ENTRIES) == \
        (None, {"weights": "fp8", "kv": "fp8"})
    bad = {"e": {**ENTRIES["e"], "scenarios": {"Offline": {"max_num_seqs": 8}}}}
    with pytest.raises(mb.InvalidInputError, match="max_num_seqs"):
        mrows.submission_of("v5.1", "Acme", "llama2-70b", "vllm", "mi300x", "Offline", 8, bad)


def test_shipped_submissions_cite_their_code_and_use_known_fields():
    subs = mrows.load_submissions()
    assert subs
    executors = {"vllm": ("harness", "server"), "tensorrt-llm": ("pytorch",)}     # TensorRT-LLM's: trtllm-serve
    for name, e in subs.items():
        assert e["engine"] in executors and e["source"]
        assert set(e["formats"] if "formats" in e else {}) <= set(mrows.FORMAT_FIELDS)
        assert set(e) <= {"round", "submitters", "benchmark", "engine", "device", "formats", "scenarios", "source",
                          "stack", *mrows.ENTRY_LAUNCH_FIELDS}, name
        # a tuned GEMM share is below what the chip achieves at all (its profile's bf16 MAMF share), and a launch
        # that names one multiplies at exactly that share of the chip's peak, reads and multiplies adding
        hw = mb.load_hardware(e["device"])
        assert e.get("gemm_fraction", 0.0) <= hw.achievable.compute_fraction, name
        if "gemm_fraction" in e:
            launch, _ = mrows.submission_of(e["round"], e["submitters"][0], e["benchmark"], "vllm", e["device"],
                                            "Offline", 8)
            eff = efficiency(mrows.launched("vllm", launch, e["device"]), hw)
            assert (eff.compute_fraction, eff.overlap) == (pytest.approx(e["gemm_fraction"], rel=1e-12), 0.0), name
        for sc, fields in e["scenarios"].items():
            assert sc in mrows.SCENARIOS and set(fields) <= set(mrows.LAUNCH_FIELDS) | set(mrows.FORMAT_FIELDS), name
            assert fields["executor"] in executors[e["engine"]], name
        mb.load_hardware(e["device"])


def test_vllm_rows_read_their_submission(tmp_path):
    # Intel's v5.1 Arc Pro B60 Dual (2 GPUs a card, 4 cards: 8 devices) launches: Offline pipeline 4 with
    # 768 sequences and 256 tokens a step, 4-bit weights, 8-bit activations and KV (its SUT.py); the row's
    # own precision column says only weights=UINT4
    row = dict(round="v5.1", division="closed", submitter="Intel", system_name="1-node-4x-BMG-Pro-B60-Dual",
               benchmark="llama2-70b-99", model="llama2-70b", scenario="Offline", tokens_per_s=3000.0,
               accelerator="[MAXSUN] MS-Intel Arc Pro B60 Dual 48G Turbo",
               accel_family="Intel-Arc-Pro-B60", accel_variant="Intel-Arc-Pro-B60-Dual(2 GPUs/card)",
               accelerators_per_node=4, n_accelerators=4, tokens_per_s_per_accel=750.0, framework="vLLM 0.9.0, PyTorch 2.7.0",
               software_stack="6.14.0-24", precision="weights=UINT4; inputs=UINT8; transform=Yes")
    rows = [row, {**row, "scenario": "Server"}, {**row, "submitter": "Other", "system_name": "o"}]
    path = tmp_path / "m.csv"
    pd.DataFrame(rows, columns=list(mrows.REQUIRED) + ["accel_variant"]).to_csv(path, index=False)
    (off, srv, other), _ = mrows.load_rows(path)
    q = off.quantization
    assert (q.weights, q.activations, q.kv) == ("int4", "int8", "int8")
    assert off.executor == "harness" and off.per_node == 8 and off.measured == 375.0    # 750 per card / 2 GPUs
    assert off.launch == mrows.Launch("harness", tp=1, pp=4, max_running=768, token_budget=256)
    assert srv.launch == mrows.Launch("harness", tp=2, max_running=160, token_budget=320, memory_fraction=0.99)
    b = mrows.load_benchmarks()["llama2-70b"]
    assert mrows.row_layouts(b, "vllm", off.device, off.round, "int4", 8, off.launch) == [mb.Parallel(tp=1, pp=4)]
    # a submitter without an entry: the loader's rules (precision column, the engine's runtime, the layout rule)
    assert other.launch is None and other.executor == "" and other.quantization.activations is None
    assert mrows.executor_of("vllm", "vLLM 0.9.0", b) == ""          # vLLM's stack words name no executor


def test_harness_generation_drops_the_servers_request_costs_and_fits_nothing():
    gens = mrows.load_generations()
    g = gens["vllm-harness"]
    assert (g["engine"], g["executor"]) == ("vllm", "harness") and mrows.EXECUTORS["vllm"]["harness"] == "vllm-harness"
    assert {k: v["status"] for k, v in g["served"].items()} == {"per_request_s": "code", "per_prompt_token_s": "code"}
    eng = mb.load_runtime("vllm").served
    for rnd in ("v4.1", "v5.1", "v6.0"):
        s = mrows.runtime_of("vllm", "harness", rnd).served
        assert (s.per_request_s, s.per_prompt_token_s) == (0.0, 0.0)
        # no round fitted: every other constant is the engine's
        assert (s.per_sequence_s, s.compute_fraction, s.per_layer_s) == \
            (eng.per_sequence_s, eng.compute_fraction, eng.per_layer_s)
    assert g["rounds"] == {}
    assert mrows.runtime_of("vllm", "server", "v5.1") == "vllm"        # an HTTP endpoint: the engine's runtime


def test_a_moe_submission_names_its_experts_formats(tmp_path):
    # MangoBoost's v6.1 MI300X gpt-oss ran self-quantized fp8 experts with fp8 activations, attention, router and
    # head in bf16 (its measurements README); the loader's rule alone reads every gpt-oss row as MXFP4 experts
    row = dict(round="v6.1", division="closed", submitter="MangoBoost", system_name="8xMI300X_2xEPYC_9534",
               benchmark="gpt-oss-120b", model="gpt-oss-120b", scenario="Offline", tokens_per_s=8000.0,
               accelerator="AMD Instinct MI300X 192GB HBM3", accel_family="MI300X", accel_variant="MI300X",
               accelerators_per_node=8, n_accelerators=8, tokens_per_s_per_accel=1000.0,
               framework="vLLM 0.24.0 (stock vllm/vllm-openai-rocm:v0.24.0), ROCm 7.2.1", software_stack="",
               precision="weights=fp8")
    path = tmp_path / "m.csv"
    pd.DataFrame([row, {**row, "submitter": "Other"}], columns=list(mrows.REQUIRED) + ["accel_variant"]).to_csv(path, index=False)
    (mango, other), _ = mrows.load_rows(path)
    q = mango.quantization
    assert (q.weights, q.dense_weights, q.expert_activations, q.kv) == ("fp8", "bf16", "fp8", "fp8")
    assert mango.executor == "harness"
    assert other.quantization.weights == "mxfp4" and other.executor == ""
