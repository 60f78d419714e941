"""One reading of a (speed per user, throughput per chip) curve (`membound.physics.fares`) serves the static
batches' bus fare and fast mode (`bus_fare`, `fast_mode`) and the served curve's
(`ServeCurve.bus_fare`, `ServeCurve.fast_mode`)."""
import math

import numpy as np
import pytest

import membound as mb
from membound.planning.batching import bus_fare, fast_mode
from membound.physics.fares import SpeedCurve

# a curve of power laws in the load c: u = 100 / sqrt(c) tok/s per user, t = 100 sqrt(c) tok/s per chip
POWER = SpeedCurve(np.array([1.0, 4.0, 16.0]), np.array([100.0, 50.0, 25.0]), np.array([100.0, 200.0, 400.0]))


def test_fast_lane_by_hand():
    # standard lane at c = 16 (u 25, t 400); 1.5x faster is u = 37.5, between the points c = 4 and 16.
    # In logs the curve is a line: w = ln(37.5/25) / ln(50/25) = ln 1.5 / ln 2 of the way from c = 16 to 4,
    # so t = 400 x (200/400)^w = 400 / 1.5 = 266.67 and c = 16 x (4/16)^w = 16 / 1.5^2 = 7.111
    f = POWER.fast_lane(1.5, 16.0)
    assert f.tok_s_per_user == pytest.approx(37.5, rel=1e-12)
    assert f.price_ratio == pytest.approx(400 / (400 / 1.5), rel=1e-12)
    assert f.load == pytest.approx(16 / 1.5 ** 2, rel=1e-12)
    # on a point: 2x faster than c = 16 is c = 4 exactly, at half the throughput
    g = POWER.fast_lane(2.0, 16.0)
    assert (g.load, g.price_ratio) == (pytest.approx(4.0, rel=1e-12), pytest.approx(2.0, rel=1e-12))


def test_bus_fare_by_hand():
    # a rider at c = 2 against the full bus (the highest t: c = 16): t(2) = 100 sqrt 2 (log-interpolated
    # between c = 1 and 4), so the fare is 400 / 141.42 = 2^1.5 = 2.828; u(2) / u(16) = 70.71 / 25 = 2^1.5
    f = POWER.fare(2.0)
    assert f.base == 16.0
    assert f.price_ratio == pytest.approx(2 ** 1.5, rel=1e-12) and f.speedup == pytest.approx(2 ** 1.5, rel=1e-12)
    # on the points themselves the figures are the points' own, not interpolated
    assert POWER.fare(1.0).price_ratio == 4.0 and POWER.fare(1.0, 4.0).speedup == 2.0


def test_a_speed_off_the_curve_names_the_field():
    with pytest.raises(mb.InvalidInputError, match="speedup"):
        POWER.fast_lane(8.0, 16.0)      # 200 tok/s per user: the curve tops out at 100


KW = dict(n_chips=8, runtime="vllm", prompt_tokens=2048, output_tokens=512)


def test_the_static_bus_fare_is_the_price_per_token_ratio():
    # the reading's price ratio is estimate()'s cost ratio: cost = chips x price x e2e / (B x T)
    fare = bus_fare("llama-3.1-70b", "h100-sxm", batch=1, full_batch=64, **KW)
    assert fare.price_ratio == pytest.approx(fare.cost_per_million_usd / fare.full_cost_per_million_usd, rel=1e-12)
    assert fare.speedup == pytest.approx(fare.per_user_tok_s / fare.full_per_user_tok_s, rel=1e-12)
    one, full = (mb.estimate("llama-3.1-70b", "h100-sxm", batch=b, **KW) for b in (1, 64))
    assert fare.price_ratio == pytest.approx(64 * one.e2e_s / full.e2e_s, rel=1e-9)


def test_the_static_fast_mode_reports_its_two_batches_own_ratios():
    f = fast_mode("llama-3.1-70b", "h100-sxm", speedup=2.5, price_ratio=6.0, **KW)
    fast, slow = (mb.estimate("llama-3.1-70b", "h100-sxm", batch=b, **KW) for b in (f.fast_batch, f.slow_batch))
    assert f.speedup == pytest.approx(fast.decode_tok_s_per_user / slow.decode_tok_s_per_user, rel=1e-9)
    assert f.price_ratio == pytest.approx(fast.cost_per_million_tokens_usd / slow.cost_per_million_tokens_usd,
                                          rel=1e-9)
    # the fast lane is the batch nearest the one read 2.5x faster than the standard lane
    c = mb.batch_curve("llama-3.1-70b", "h100-sxm", batches=range(1, f.slow_batch + 1), **KW)
    u = c.per_user_tok_s
    target = 2.5 * u[-1]
    j = int(np.searchsorted(-u, -target))       # u falls with the batch: u[j-1] >= target > u[j], batches j, j+1
    assert f.fast_batch in (j, j + 1)
    assert abs(math.log(f.speedup / 2.5)) <= max(abs(math.log(u[j - 1] / u[-1] / 2.5)), abs(math.log(u[j] / u[-1] / 2.5)))


def test_the_served_curve_reads_the_same_way():
    c = mb.serve_curve("llama-3.1-8b", "h100-sxm", n_chips=1, concurrency=[1, 4, 16, 64], prompt_tokens=512,
                       output_tokens=128)
    s = SpeedCurve(c.concurrency, c.tok_s_per_user, c.output_tok_s_per_chip)
    assert c.bus_fare(4) == s.fare(4).price_ratio == c.output_tok_s_per_chip.max() / c.output_tok_s_per_chip[1]
    fm = c.fast_mode(1.5, standard_concurrency=64)
    assert fm.price_ratio == s.fast_lane(1.5, 64).price_ratio
