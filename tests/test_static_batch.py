"""Static batching (v3.1's GPT-J harness): a batch decodes until its longest request ends."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from membound.errors import InvalidInputError
from membound.fidelity import mlperf_rows as mrows
from membound.fidelity import mlperf_validate as mv
from membound.serving.lengths import Fixed, Samples, Uniform, longest_of


def test_the_longest_of_two_draws_by_hand():
    # four equally likely lengths 1..4; the longest of two draws is k with probability (k/4)^2 - ((k-1)/4)^2:
    # 1/16, 3/16, 5/16, 7/16, mean (1 + 6 + 15 + 28) / 16 = 50 / 16 = 3.125. At the 16 midpoints
    # q = (i + 1/2) / 16 the quantile is ceil(4 sqrt(q)): q <= 1/16 -> 1 (one point, i = 0), q <= 4/16 -> 2
    # (i = 1..3), q <= 9/16 -> 3 (i = 4..8), else 4 (i = 9..15): exactly 1, 3, 5 and 7 points
    law = longest_of(Samples((3, 1, 4, 2)), 2, points=16)
    assert sorted(law.values) == [1] + [2] * 3 + [3] * 5 + [4] * 7
    assert law.mean == pytest.approx(50 / 16)


def test_a_batch_of_one_is_the_distribution_itself_and_a_fixed_length_stays():
    # batch 1: quantile q of the draw itself; 8 midpoints over 4 values take each twice
    assert sorted(longest_of(Samples((1, 2, 3, 4)), 1, points=8).values) == [1, 1, 2, 2, 3, 3, 4, 4]
    assert set(longest_of(Fixed(69), 32, points=5).values) == {69}
    # Uniform 0..10 (quantile 10 q), batch 2, two midpoints q = 1/4, 3/4: 10 sqrt(q) = 5.0, 8.66 -> 5, 9
    assert longest_of(Uniform(0, 10), 2, points=2).values == (5, 9)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(1, 500), min_size=1, max_size=30), st.integers(1, 40), st.integers(1, 40))
def test_a_larger_batch_never_shortens_its_longest(values, b1, b2):
    small, large = sorted((b1, b2))
    d = Samples(tuple(values))
    lo, hi = longest_of(d, small, points=64), longest_of(d, large, points=64)
    assert min(values) <= lo.mean <= hi.mean <= max(values)


@pytest.mark.parametrize("field,value", [("batch", 0), ("batch", True), ("points", 0), ("batch", 2.5)])
def test_bad_batch_or_points_name_the_field(field, value):
    kw = {"batch": 2, "points": 4, field: value}
    with pytest.raises(InvalidInputError, match=field):
        longest_of(Samples((1, 2)), **kw)


def _gptj_rows(tmp_path):
    import pandas as pd
    from test_mlperf_validate import COLUMNS, _row
    rows = [_row(round="v3.1", model="gptj", benchmark="gptj-99", scenario=sc, framework="TensorRT 9.0.0, CUDA 12.2",
                 accelerator="NVIDIA L40", accel_family="L40", accel_variant="L40", precision="")
            for sc in ("Offline", "Server")]
    path = tmp_path / "m.csv"
    pd.DataFrame(rows, columns=COLUMNS).to_csv(path, index=False)
    return mrows.load_rows(path)[0]


def test_v31_static_batches_are_recorded_and_priced_only_where_switched_on(tmp_path, monkeypatch):
    from membound.planning.rate_search import saturation
    from membound.serving import build
    from membound.serving.scheduler import Scheduler
    gj = mrows.load_benchmarks()["gptj"]
    # Dell's R760xa L40 config: gpu_batch_size 14 queries of 4 beams = 56 sequences; the context pass holds the
    # batch's whole prompts, at most 14 x 1,919 = 26,866 tokens; not read for another round
    assert mrows.static_batch(gj, "tensorrt-llm", "l40", "v4.0", "Offline", None) == 0
    monkeypatch.setattr(mrows, "static_priced", lambda generations=None: True)
    assert mrows.static_batch(gj, "tensorrt-llm", "l40", "v3.1", "Offline", None) == 14
    caps = mrows.scenario_limits(gj, "tensorrt-llm", "l40", "v3.1", "Offline")
    assert caps == Scheduler(max_running=56, token_budget=26866, chunked_prefill=False, mixed_steps=False)
    # priced: the Offline engine runs 56 sequences, each request held for the longest output of its batch of 14,
    # and counts its own 69 tokens a request
    off, srv = _gptj_rows(tmp_path)
    mv.predict([off, srv])
    rt = mrows.runtime_of("tensorrt-llm", "cpp", "v3.1")
    sm, sched, _ = build("gpt-j-6b", "l40", prompt=gj.prompt, output=gj.output, quantization=off.quantization,
                         runtime=rt, scheduler=caps)
    held = longest_of(gj.output, 14)
    assert off.pred["tok_s_per_accel"] == pytest.approx(saturation(sm, sched, gj.prompt, held, 4) * gj.output.mean,
                                                        rel=1e-9)
    assert 0 < srv.pred["tok_s_per_accel"] <= off.pred["tok_s_per_accel"] * (1 + 1e-9)
    # not priced (the shipped switch): the engine's own knobs, every request its own output
    monkeypatch.setattr(mrows, "static_priced", lambda generations=None: False)
    assert mrows.scenario_limits(gj, "tensorrt-llm", "l40", "v3.1", "Offline") is None
    assert mv.decoded(gj, mrows.static_batch(gj, "tensorrt-llm", "l40", "v3.1", "Offline", None)) is gj.output


def test_the_static_switch_must_say_true_or_false():
    with pytest.raises(InvalidInputError, match="static_batching.priced"):
        mrows.static_priced({"g": {"static_batching": {"priced": "yes"}}})
    assert mrows.static_priced({"g": {}}) is False
    assert mrows.static_priced({"g": {"static_batching": {"priced": True}}}) is True
