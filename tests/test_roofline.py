"""The closed-form sums of the core against brute force, floats and arrays alike."""
import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from membound.physics.roofline import (causal_pairs, context_pieces, effective_context, expected_experts,
                               sum_linear, sum_max3, sum_over_context, sum_positive_part)

pos = st.floats(0, 5, allow_nan=False)
slope = st.sampled_from([0.0, 1e-3, 0.01, 1.0])


def test_sum_linear_by_hand():
    # 2 + 3L for L = 4, 5, 6: 14 + 17 + 20 = 51
    assert sum_linear(2.0, 3.0, 4.0, 7.0) == 51.0
    assert sum_linear(2.0, 3.0, 7.0, 4.0) == 0.0


def test_sum_positive_part_by_hand():
    # max(L - 3, 0) for L = 0..5: 0+0+0+0+1+2 = 3 ; max(3 - L, 0): 3+2+1 = 6
    assert sum_positive_part(-3.0, 1.0, 0.0, 6.0) == 3.0
    assert sum_positive_part(3.0, -1.0, 0.0, 6.0) == 6.0


@settings(max_examples=300, deadline=None)
@given(pos, pos, slope, pos, slope, pos, st.integers(0, 60), st.integers(0, 120))
def test_sum_max3_matches_brute_force(ma, mb_, sm, ca, sc, fl, lo, n):
    m_b, c_b = mb_ * sm, ca * sc
    brute = sum(max(ma + m_b * L, ca + c_b * L, fl) for L in range(lo, lo + n))
    got = sum_max3(ma, m_b, ca, c_b, fl, float(lo), float(lo + n))
    assert got == pytest.approx(brute, rel=1e-9, abs=1e-9)
    arr = sum_max3(*(np.array([x]) for x in (ma, m_b, ca, c_b, fl, float(lo), float(lo + n))))
    assert arr[0] == pytest.approx(got, rel=1e-12, abs=1e-12)


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 3000), st.integers(0, 2000), pos, pos, pos)
def test_windowed_sum_matches_brute_force(start, n, ma, ca, fl):
    groups = ((1024, 5), (None, 1))          # Gemma-3 style: 5 local layers per global one
    pieces = context_pieces(groups, 6)
    m_b, c_b = 1e-3, 2e-4
    brute = sum(max(ma + m_b * effective_context(groups, L), ca + c_b * effective_context(groups, L), fl)
                for L in range(start, start + n))
    got = sum_over_context(pieces, ma, m_b, ca, c_b, fl, float(start), float(n))
    assert got == pytest.approx(brute, rel=1e-9, abs=1e-9)


def test_effective_context_and_causal_pairs_by_hand():
    groups = ((4, 2), (None, 1))
    # context 10: two windowed layers see 4 each, the global one 10 -> 18
    assert effective_context(groups, 10.0) == 18.0
    # prefill of 6 tokens: global sum_{i<6} i = 15; windowed sum min(i,4) = 0+1+2+3+4+4 = 14 each
    assert causal_pairs(groups, 6.0) == 15 + 2 * 14


def test_expected_experts():
    assert expected_experts(8.0, 2.0, 1.0) == pytest.approx(2.0)
    assert expected_experts(8.0, 2.0, 2.0) == pytest.approx(8 * (1 - 0.75 ** 2))   # 3.5
    assert expected_experts(0.0, 0.0, 5.0) == 0.0
    assert expected_experts(256.0, 8.0, 1e6) == pytest.approx(256.0)
    # the plain-float path and the array path are the same arithmetic: equal to the last bit
    # (8 (1 - 0.75^2) = 3.5 exactly in binary; 0 experts read none, as zeros of the tokens' shape)
    tokens = np.array([1.0, 2.0, 3.0, 1e6])
    assert expected_experts(8.0, 2.0, 2.0) == 3.5 == expected_experts(np.float64(8.0), 2.0, 2.0)
    assert [expected_experts(8.0, 2.0, t) for t in tokens.tolist()] == expected_experts(8.0, 2.0, tokens).tolist()
    assert expected_experts(0.0, 0.0, tokens).tolist() == [0.0] * 4


def test_sum_max3_by_hand_at_its_clips():
    # max(L, L/2, 3) for L = 0..5: the memory line reaches the floor at L = 3 exactly: 3+3+3+3+4+5 = 21
    assert sum_max3(0.0, 1.0, 0.0, 0.5, 3.0, 0.0, 6.0) == 21.0
    # reached before the range: L = 4, 5, 6 -> 4 + 5 + 6 = 15
    assert sum_max3(0.0, 1.0, 0.0, 0.5, 3.0, 4.0, 7.0) == 15.0
    # never reached within it: the floor, 100, over 6 contexts = 600
    assert sum_max3(0.0, 1.0, 0.0, 0.5, 100.0, 0.0, 6.0) == 600.0
    # the compute line crosses the memory line at L = 4: max(L, 2L - 4, 1) for L = 0..6:
    # 1 + 1 + 2 + 3 + 4 + 6 + 8 = 25
    assert sum_max3(0.0, 1.0, -4.0, 2.0, 1.0, 0.0, 7.0) == 25.0
    # flat lines: max(2, 1, 1.5) = 2 at each of 4 contexts = 8
    assert sum_max3(2.0, 0.0, 1.0, 0.0, 1.5, 3.0, 7.0) == 8.0
    # a range past its end (lo > hi) sums to nothing
    assert sum_max3(0.0, 1.0, 0.0, 0.5, 3.0, 7.0, 4.0) == 0.0
    # max(3 - L, 0) over L = 1..5: 2 + 1 = 3; max(-3 - L, 0): a line below zero throughout, 0
    assert sum_positive_part(3.0, -1.0, 1.0, 6.0) == 3.0
    assert sum_positive_part(-3.0, -1.0, 1.0, 6.0) == 0.0


def test_sum_max3_arrays_are_the_float_path_bit_for_bit():
    # the array path finds each bound in the coefficients' shape and clips it to [lo, hi] once; the
    # plain-float path clips at lo - 1 and hi + 1 first (roofline.sum_max3): the same floats, over
    # thresholds on, beside and past integers, flat and tiny slopes, and ranges empty or past their end
    from membound.physics.roofline import _sum_max3_float
    cases = list(itertools.product((0.0, 1.0, 2.5), (0.0, 1e-260, 0.25, 1.0), (0.0, 3.0), (0.0, 0.5, 1.0 / 3.0),
                                   (0.0, 1.0, 3.0, 4.5), (0.0, 1.0, 4.0), (-2.0, 0.0, 1.0, 5.0)))
    m_a, m_b, c_a, c_b, fl, lo, n = (np.array(col) for col in zip(*cases))
    arr = sum_max3(m_a, m_b, c_a, c_b, fl, lo, lo + n)
    floats = [_sum_max3_float(*case[:6], case[5] + case[6]) for case in cases]
    assert arr.tolist() == floats
    assert [math.copysign(1.0, x) for x in arr.tolist()] == [math.copysign(1.0, x) for x in floats]
