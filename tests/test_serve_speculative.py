"""Speculative decoding (MTP) inside serve(): hand-derived steps, the MTP module's size, bad input."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import membound as mb
from membound.physics.speculative import mtp_module
from membound.serving import build
from membound.fidelity.serve_validate import MTP_DRAFTS, load_rows

H100_BW = 3.35e12                      # B/s
H = 4096                               # Llama-3.1-8B hidden size
L8B = 8_030_261_248                    # Llama-3.1-8B parameters
LOOKUP = 128256 * H                    # untied input embedding: a step reads only its tokens' rows
KV_8B = 2 * 32 * 8 * 128 * 2           # bytes per cached token: K and V, 32 layers, 8 heads x 128, bf16
LAYER = (H * H + 2 * H * 1024 + H * H) + 3 * H * 14336 + 2 * H   # q, k, v, o + gated MLP + 2 norms
MTP_8B = LAYER + 2 * 128256 * H + H    # one layer + embedding + LM head + final norm


def test_mtp_module_is_one_layer_with_the_shared_embedding_and_head():
    # Llama-3.1-8B: 41,943,040 attention + 176,160,768 MLP + 8,192 norms = 218,112,000 per layer;
    # 32 layers + 2 x 525,336,576 (embedding, LM head) + 4,096 = 8,030,261,248.
    assert LAYER == 218_112_000 and 32 * LAYER + 2 * LOOKUP + H == L8B
    m = mtp_module("llama-3.1-8b")
    assert m.n_layers == 1 and m.total_params == MTP_8B          # 1,268,789,248
    # DeepSeek-R1: one MoE layer with embedding and LM head (2 x 129,280 x 7,168 = 1.853B):
    #   experts: 257 (256 routed + 1 shared) x 3 x 7168 x 2048 = 11,318,329,344
    #   MLA attention: q_a 7168x1536 + q_b 1536x(128x192) + kv_a 7168x(512+64) + kv_b 512x(128x256)
    #                  + o (128x128)x7168 = 187,105,280; router 256 x 7168 = 1,835,008
    # 13.36B against DeepSeek's published 14B for the module (its 2h x h projection left out).
    r1 = mtp_module("deepseek-r1")
    assert r1.n_layers == 1 and r1.n_experts == 256
    experts = 257 * 3 * 7168 * 2048
    attention = 7168 * 1536 + 1536 * 128 * 192 + 7168 * 576 + 512 * 128 * 256 + 128 * 128 * 7168
    assert experts == 11_318_329_344 and attention == 187_105_280
    by_hand = experts + attention + 256 * 7168 + 2 * 129280 * 7168
    assert r1.total_params == pytest.approx(by_hand, rel=1e-4)      # + norms (~25k)


@pytest.mark.parametrize("alpha,k", [(0.8, 3), (0.5, 1), (1.0, 2)])
def test_one_client_tpot_is_verify_plus_drafts_over_tokens_per_step(alpha, k):
    # Llama-3.1-8B bf16 on one H100, pure roofline ("ideal": peak bandwidth, no floor or
    # overhead), one client, prompt 1000, output 201: no other request shares a step, so every
    # decode step is one round at the mean context 1000 + 200/2 = 1100 tokens. All steps are
    # memory-bound (4 tokens x 16 GFLOP = 64 GFLOP ~ 0.07 ms against ~4.8 ms of bytes).
    #   verify pass: k+1 positions read the weights once (k+1 embedding rows looked up) and the
    #                KV once: 2 (L8B - LOOKUP + (k+1) H) + 1100 KV_8B bytes
    #   each draft : the MTP module (one layer + LM head), its one layer's KV, one row:
    #                2 (MTP_8B - LOOKUP + H) + 1100 KV_8B / 32 bytes; the first draft of a round
    #                takes all k + 1 verified positions (k + 1 embedding rows looked up):
    #                2 (MTP_8B - LOOKUP + (k + 1) H) + 1100 KV_8B / 32 bytes
    #   a round emits (1 - alpha^(k+1)) / (1 - alpha) tokens (k + 1 at alpha = 1)
    verify = (2 * (L8B - LOOKUP + (k + 1) * H) + 1100 * KV_8B) / H100_BW
    draft = (2 * (MTP_8B - LOOKUP + H) + 1100 * KV_8B / 32) / H100_BW
    first = (2 * (MTP_8B - LOOKUP + (k + 1) * H) + 1100 * KV_8B / 32) / H100_BW
    drafts = first + (k - 1) * draft
    tokens = k + 1.0 if alpha == 1.0 else (1 - alpha ** (k + 1)) / (1 - alpha)
    spec = mb.mtp("llama-3.1-8b", k, alpha)
    r = mb.serve("llama-3.1-8b", "h100-sxm", concurrency=1, prompt_tokens=1000, output_tokens=201, runtime="ideal",
                 speculative=spec)
    assert r.tpot.mean == pytest.approx((verify + drafts) / tokens, rel=1e-9)
    assert r.tok_s_per_user == pytest.approx(tokens / (verify + drafts), rel=1e-9)
    # estimate() prices the same round (core.draft_passes): its TPOT at batch 1 is the same figure
    e = mb.estimate("llama-3.1-8b", "h100-sxm", batch=1, prompt_tokens=1000, output_tokens=201, runtime="ideal",
                    speculative=spec)
    assert e.tpot_s == pytest.approx((verify + drafts) / tokens, rel=1e-9)
    # e.g. alpha 0.8, k 3: (4.8066 ms + 3 x 0.7595 ms) / 2.952 tokens = 2.4 ms, against
    # 4.8055 ms for one plain step
    plain = mb.serve("llama-3.1-8b", "h100-sxm", concurrency=1, prompt_tokens=1000, output_tokens=201,
                     runtime="ideal")
    assert plain.tpot.mean == pytest.approx((2 * (L8B - LOOKUP + H) + 1100 * KV_8B) / H100_BW, rel=1e-9)
    # one client: a request is its TTFT plus 200 tokens at TPOT (Little with N = 1)
    assert r.requests_per_s == pytest.approx(1.0 / (r.ttft.mean + 200 * r.tpot.mean), rel=1e-9)
    # the drafter also prefills the prompt: TTFT grows, never shrinks
    assert r.ttft.mean > plain.ttft.mean


def test_spec_step_counts_verified_positions_and_the_drafters_memory():
    # The step model with k drafts verifies k + 1 tokens per sequence, and the drafter's weights
    # (the MTP module, 1,268,789,248 bf16 params = 2.54 GB) and its KV (one layer's, 1/32 more
    # per token) leave less room for the cache.
    plain, _, _ = build("llama-3.1-8b", "h100-sxm", prompt=mb.serving.Fixed(1000), output=mb.serving.Fixed(200), runtime="ideal")
    sm, _, _ = build("llama-3.1-8b", "h100-sxm", prompt=mb.serving.Fixed(1000), output=mb.serving.Fixed(200), runtime="ideal",
                     speculative=mb.mtp("llama-3.1-8b", 3, 0.7))
    assert sm.positions == 4 and sm.tokens_per_step == pytest.approx((1 - 0.7 ** 4) / 0.3, rel=1e-12)
    assert sm.weights_bytes - plain.weights_bytes == pytest.approx(2 * MTP_8B, rel=1e-9)
    assert sm.kv_pair_bytes == pytest.approx(plain.kv_pair_bytes * 33 / 32, rel=1e-9)


def test_more_acceptance_never_slows_a_served_workload():
    kw = dict(concurrency=32, prompt_tokens=1024, output_tokens=1024, weight_dtype="fp8", kv_dtype="fp8",
              n_chips=8, runtime="tensorrt-llm")
    tpots = [mb.serve("deepseek-r1", "h200", speculative=mb.mtp("deepseek-r1", 3, a), **kw).tpot.mean
             for a in (0.0, 0.3, 0.6, 0.9, 1.0)]
    assert tpots == sorted(tpots, reverse=True)


@pytest.mark.parametrize("make,field", [
    (lambda: mb.mtp("deepseek-r1", -1), "gamma"),
    (lambda: mb.mtp("deepseek-r1", 0), "gamma"),
    (lambda: mb.mtp("deepseek-r1", 3, 1.5), "acceptance_rate"),
    (lambda: mb.mtp("deepseek-r1", 3, -0.1), "acceptance_rate"),
])
def test_bad_drafts_name_the_field(make, field):
    with pytest.raises(mb.MemboundError) as e:
        make()
    assert e.value.field == field


@pytest.mark.parametrize("spec,engine,field", [
    ("mtp", "solver", "speculative"),
    (mb.SpeculativeDecoding(gamma=3, acceptance_rate=0.8, draft_cost=0.05), "solver", "speculative.draft_cost"),
    (mb.SpeculativeDecoding(gamma=3, acceptance_rate=0.8), "solver", "speculative.draft"),
    (mb.mtp("llama-3.1-8b", 3), "simulate", "engine"),
])
def test_serve_refuses_what_it_does_not_model_naming_the_field(spec, engine, field):
    with pytest.raises(mb.InvalidInputError) as e:
        mb.serve("llama-3.1-8b", "h100-sxm", concurrency=4, speculative=spec, engine=engine)
    assert e.value.field == field


def test_mtp_rows_are_their_own_category_with_the_recipes_drafts():
    rows, skipped = load_rows(kinds=("mtp",))
    assert len(rows) == 68 and {r.kind for r in rows} == {"mtp"}
    assert {r.framework for r in rows} == set(MTP_DRAFTS)
    assert all(r.spec is not None and r.spec.gamma == MTP_DRAFTS[r.framework][r.parallel.ep > 1 and r.parallel.tp == 1]
               for r in rows)
    headline, _ = load_rows()
    assert not any(r.kind == "mtp" for r in headline)


def test_validate_cli_checks_the_mtp_acceptance(capsys):
    from membound.fidelity.serve_validate import main
    with pytest.raises(SystemExit) as e:
        main(["--mtp-acceptance", "1.5"])
    assert e.value.code == 2 and "acceptance_rate=1.5" in capsys.readouterr().err


@settings(max_examples=8, deadline=None)
@given(st.integers(1, 128), st.integers(1, 128), st.integers(1, 4), st.floats(0.0, 1.0))
def test_more_clients_never_raise_speed_per_user_with_drafts(n, more, k, alpha):
    spec = mb.mtp("llama-3.1-8b", k, alpha)
    kw = dict(prompt_tokens=1024, output_tokens=256, weight_dtype="fp8", runtime="vllm", speculative=spec)
    lo = mb.serve("llama-3.1-8b", "h100-sxm", concurrency=n, **kw)
    hi = mb.serve("llama-3.1-8b", "h100-sxm", concurrency=n + more, **kw)
    assert hi.tok_s_per_user <= lo.tok_s_per_user * (1 + 1e-6)


def test_disaggregated_decode_pool_drafts_too():
    # one client, decode pool of one H100: with every draft accepted (alpha = 1, k = 3) a round
    # emits 4 tokens for one verify pass of 4 positions plus 3 drafts, so TPOT falls; the
    # drafter also prefills the prompt on the prefill pool, so TTFT grows a little.
    kw = dict(concurrency=1, prefill=mb.serving.Pool(1, 1), decode=mb.serving.Pool(1, 1), prompt_tokens=512, output_tokens=128,
              runtime="ideal")
    plain = mb.serve_disaggregated("llama-3.1-8b", "h100-sxm", **kw)
    spec = mb.serve_disaggregated("llama-3.1-8b", "h100-sxm", speculative=mb.mtp("llama-3.1-8b", 3, 1.0), **kw)
    assert spec.tpot.mean < plain.tpot.mean / 2 and spec.ttft.mean > plain.ttft.mean


def test_the_mtp_rows_run_this_workloads_acceptance_and_mtp_keeps_the_cited_one():
    # InferenceMAX's random-token prompts: one per-token acceptance for the data set (fitted on the
    # H200 MTP rows), while mb.mtp() keeps DeepSeek-V3's natural-text 0.85 (public default).
    from membound.fidelity.serve_validate import INFERENCEMAX_MTP_ACCEPTANCE
    from membound.physics.speculative import MTP_ACCEPTANCE
    assert MTP_ACCEPTANCE == 0.85 and mb.mtp("deepseek-r1", 3).acceptance_rate == 0.85
    a = INFERENCEMAX_MTP_ACCEPTANCE
    assert a == 0.53
    rows, _ = load_rows(kinds=("mtp",))
    assert {r.spec.acceptance_rate for r in rows} == {a}
    # tokens a round emits, 1 + a + a^2 (+ a^3): TensorRT-LLM's 3 drafts 1 + 0.53 + 0.2809 +
    # 0.148877 = 1.959777, SGLang's 2: 1.8109, TensorRT-LLM's 1 with DP attention: 1.53
    by_gamma = {r.spec.gamma: r.spec.tokens_per_round for r in rows}
    assert by_gamma[3] == pytest.approx(1.959777, rel=1e-12)
    assert by_gamma[2] == pytest.approx(1.8109, rel=1e-12)
    assert by_gamma[1] == pytest.approx(1.53, rel=1e-12)


def test_the_mtp_acceptance_fit_recovers_a_known_figure_from_the_fit_chips_rows_only():
    # Rows whose "measurements" are membound's own predictions at acceptance 0.6 give back 0.6:
    # every residual log(pred / meas) is 0 there. B200 rows made 3x slower are ignored (held out).
    import copy

    from membound.fidelity.serve_calibrate import fit_mtp_acceptance, mtp_residuals
    rows, _ = load_rows(kinds=("mtp",))
    h200 = [copy.copy(r) for r in rows if r.hw == "h200"][:6]
    b200 = [copy.copy(r) for r in rows if r.hw == "b200"][:3]
    assert {r.fitted for r in h200} == {True} and {r.fitted for r in b200} == {False}
    mtp_residuals(h200, 0.6)
    for r in h200:
        r.tpot_s, r.ttft_s, r.tput_per_gpu = r.pred["tpot_s"], r.pred["ttft_s"], r.pred["tput_per_gpu"]
    for r in b200:
        r.tpot_s, r.ttft_s, r.tput_per_gpu = 3 * r.tpot_s, 3 * r.ttft_s, r.tput_per_gpu / 3
    assert mtp_residuals(h200, 0.6) == pytest.approx([0.0] * 18, abs=1e-12)
    fit = fit_mtp_acceptance(h200 + b200)
    assert fit["n"] == 6 and fit["exact"] == pytest.approx(0.6, abs=2e-3) and not fit["on_bound"]


def test_the_bundled_mtp_acceptance_is_the_fit_on_the_20_h200_mtp_rows():
    # names the rows: 20 canonical good H200 MTP rows (SGLang 8, TensorRT-LLM 12), 2026-01-14 ..
    # 2026-05-20; the fit lands inside (0, 0.99), not on a bound
    from membound.fidelity.serve_calibrate import fit_mtp_acceptance
    from membound.fidelity.serve_validate import INFERENCEMAX_MTP_ACCEPTANCE
    fit = fit_mtp_acceptance()
    assert fit["n"] == 20 and fit["dates"] == ("2026-01-14", "2026-05-20") and not fit["on_bound"]
    assert fit["acceptance"] == INFERENCEMAX_MTP_ACCEPTANCE


def test_the_mtp_report_names_its_acceptance_and_its_fitted_rows():
    from membound.fidelity.serve_validate import other_categories, report
    text = report([], [], {"mtp": other_categories()["mtp"]})
    assert "acceptance 0.53 per token (this workload's, fitted on the H200 MTP rows)" in text
    assert "fitted rows (acceptance fitted on them)          20/20" in text
    assert "VALIDATION (select chips held out)               48/48" in text   # B200: a select chip
    cited = report([], [], {"mtp": other_categories(mtp_acceptance=0.85)["mtp"]})
    assert "acceptance 0.85 per token (DeepSeek-V3's on natural text, cited, not fitted)" in cited


def test_estimate_and_serve_count_the_same_drafter_bytes():
    # DeepSeek-R1's MTP module (one MoE layer: 256 routed experts of 3 x 7168 x 2048 = 44,040,192 params each,
    # fp8: 1 byte a weight) on 8 x H200, laid out like its target: under tp = 8 a chip holds 1/8 of its dense
    # tensors and 1/8 of each expert; under ep = 8 (attention data-parallel) all its dense tensors and 32 of the
    # 256 experts. So with X = 256 x 44,040,192 bytes of experts, other(ep) - X/8 = 8 (other(tp) - X/8).
    # estimate() and serve() count the same bytes (estimate.draft_bytes)
    from membound.catalog.dtypes import get_dtype
    kw = dict(weight_dtype="fp8", kv_dtype="fp8", n_chips=8, runtime="sglang")
    spec = mb.mtp("deepseek-r1", 2, 0.5)
    other = {}
    for layout in (mb.Parallel(tp=8), mb.Parallel(ep=8)):
        e = mb.estimate("deepseek-r1", "h200", parallel=layout, speculative=spec, **kw)
        plain, _, _ = build("deepseek-r1", "h200", prompt=mb.serving.Fixed(1000), output=mb.serving.Fixed(200),
                             parallel=layout, **kw)
        sm, _, _ = build("deepseek-r1", "h200", prompt=mb.serving.Fixed(1000), output=mb.serving.Fixed(200), parallel=layout,
                         speculative=spec, **kw)
        assert sm.weights_bytes - plain.weights_bytes == pytest.approx(e.memory.other_bytes, rel=1e-12)
        other[layout.ep] = e.memory.other_bytes
    assert mtp_module("deepseek-r1").expert_params == 3 * 7168 * 2048
    x = 256 * 3 * 7168 * 2048 * get_dtype("fp8").bytes
    assert other[8] - x / 8 == pytest.approx(8 * (other[1] - x / 8), rel=1e-12)
