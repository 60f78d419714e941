"""The steady-state solver: the mean running batch, step, TTFT and throughput of a loaded engine."""
from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Callable
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
from scipy.special import gammainc, gammaln

from ..physics.core import Pass
from ..errors import DoesNotFitError, InvalidInputError
from ..physics.roofline import causal_pairs, floor, maximum, minimum, where
from .lengths import Length
from .scheduler import Scheduler, filled
from .step import StepModel


# prompts-per-step counts the open loop's clumped steps price one by one (`_State._clumped`), and the
# rounds of the step-length bias (a long step gathers more prompts for the next)
CLUMP_POINTS = 12
CLUMP_ROUNDS = 2
# `_root`'s geometric grid: points per round (their exponents, from lo to hi), rounds; the most
# steps `_guess` takes towards a root
ROOT_POINTS, ROOT_ROUNDS = 24, 7
ROOT_STEPS = np.linspace(0.0, 1.0, ROOT_POINTS)
GUESS_STEPS = 12
# the rounds `_root_ahead` predicts beyond the known one from its first, coarse grid (points 2.46x
# apart over 1e9): its crossing is good to about the next round's bracket (4% wide; the one after
# is 0.17%). Measured on 237 open-loop solves: 1 to 3 rounds of the 6 predicted held, and predicting
# 1 takes as many evaluations (3.11 on average) on 198 points in all instead of 287
FIRST_AHEAD = 1


def _poisson_mix(means, weights, n: int):
    """The law of K drawn from a mixture of Poissons (means, weights: arrays whose first axis lists
    the parts) over K = 0 .. n - 1 and a last cell for K >= n: (weights, counts), each cell's count
    being K (the last: its conditional mean, E[K; K >= n] = mean P(K >= n - 1) for a Poisson)."""
    m = np.asarray(means, float)
    k = np.arange(n, dtype=float).reshape((-1, 1) + (1,) * (m.ndim - 1))
    pmf = np.exp(k * np.log(np.maximum(m[None], 1e-300)) - m[None] - gammaln(k + 1.0))    # (k, parts, ...)
    w = np.sum(pmf * weights[None], axis=1)
    tail = np.sum(np.clip(gammainc(float(n), m), 0.0, 1.0) * weights, axis=0)
    tail_k = np.sum(m * np.clip(gammainc(float(n - 1), m), 0.0, 1.0) * weights, axis=0)
    counts = np.concatenate([np.broadcast_to(k[:, 0], w.shape), np.where(tail > 1e-300, tail_k / np.maximum(
        tail, 1e-300), float(n))[None]], axis=0)
    return np.concatenate([w, tail[None]], axis=0), counts


@dataclass(frozen=True)
class Steady:
    """Solver output, arrays over the concurrency (or rate) values."""

    running: np.ndarray      # decoding sequences
    tau: np.ndarray          # mean time per decode token (TPOT)
    tau_d: np.ndarray        # a decode-only step
    tau_m: np.ndarray        # a step carrying a prefill chunk (prefill step alone when not mixed)
    mixed_share: np.ndarray  # share of decode steps with a prefill chunk
    request_rate: np.ndarray  # requests per second
    ttft: np.ndarray
    prefill: np.ndarray      # the prompt's own chunks, no waiting
    cap: float               # running-sequence cap (scheduler, KV cache)
    kv_cap_pairs: float
    u_mean: float            # (layer, token) pairs a decoding sequence attends to, at the mean context
    h_mean: float            # the pairs it holds there (u_mean but under sparse attention)


def sequence_hold(sm: StepModel, sched: Scheduler, S: float, D: float, h: float, whole: float) -> float:
    """KV pairs a decoding sequence holds on average: the h it holds at the mean context S + D / 2,
    block-rounded; under preemption="none" a whole request's (`whole` tokens), reserved."""
    if sched.preemption == "none":
        return float(sm.held(whole))
    return h + filled(sched.kv_block_tokens) / 2.0 * (h / max(S + D / 2.0, 1.0))


def kv_room(sm: StepModel, sched: Scheduler) -> float:
    """The KV pairs a chip's cache holds (`StepModel.kv_pairs_capacity`); DoesNotFitError where
    the weights leave it none."""
    kv_pairs = sm.kv_pairs_capacity(sched)
    if kv_pairs <= 0.0:
        need = sm.weights_bytes
        raise DoesNotFitError(need, sm.capacity_bytes, math.ceil(need * sm.n_chips / sm.capacity_bytes) + 1,
                              f"{sm.prepared.model.name} weights on {sm.n_chips} x {sm.prepared.hardware.name}, "
                              f"per chip, leave no room for a KV cache")
    return kv_pairs


def kv_room_knobs(sched: Scheduler) -> str:
    """The scheduler's knobs that set `kv_room`, for an error that a request does not fit in it."""
    return (f"at memory_fraction={filled(sched.memory_fraction):g} and kv_block_tokens={filled(sched.kv_block_tokens)}"
            " of the scheduler")


def _running_cap(state: _State, prompt: float) -> tuple[float, float]:
    """The most sequences that run at once (the scheduler's cap, the KV cache's, the token
    budget's) and the KV pairs a chip holds; errors where not one request fits."""
    sm, sched, S, W = state.sm, state.sched, state.S, state.W
    kv_pairs = kv_room(sm, sched)
    # beams share their prompt's KV blocks (TensorRT-LLM's KVCacheManager.add_sequence allocates the
    # context blocks share_across_beam; each beam's generated tokens get blocks of its own)
    shared = (1.0 - 1.0 / W) * float(sm.held(S))
    hold = sequence_hold(sm, sched, S, state.D, state.h_mean, S + state.T) - shared
    cap = min(float(filled(sched.max_running)) * W, kv_pairs / max(hold, 1e-30), (state.P - 1.0) / sm.positions)
    if cap < 1.0:
        raise InvalidInputError("prompt_tokens", prompt, f"a workload whose KV cache for one request fits: "
                                f"{kv_pairs:.3g} KV pairs free per chip {kv_room_knobs(sched)}, one request needs "
                                f"{hold:.3g}")
    return cap, kv_pairs


def _balance_wait(ranks: int, hold_steps: int, b, arrivals, step):
    """Steps' worth of time a prompt waits for DP-attention balancing: prompts are held until
    every one of the ranks has one (a new request goes to a rank that just finished one, at
    random: ranks x H(ranks) arrivals, the coupon collector's count) or `hold_steps` steps pass,
    whichever is first; an arrival waits half that cycle on average. Ranks left without a
    sequence (b < ranks) take prompts at once. arrivals: requests per step of `step` seconds."""
    if ranks == 1 or hold_steps == 0:
        return 0.0
    collect = ranks * sum(1.0 / i for i in range(1, ranks + 1))
    cycle = np.minimum(collect / np.maximum(arrivals, 1e-30), float(hold_steps))
    return np.where(b >= ranks, 0.5 * cycle * step, 0.0)


def batch_wait(hold_steps: int, threshold: float, budget: float, prompt: float, gen, arrivals):
    """Batch waiting (TensorRT-LLM's PyExecutor._waiting_requests): while sequences decode, new
    prompts are held until the step's tokens, the held prompts' plus the `gen` decode tokens,
    reach `threshold`, or `hold_steps` steps pass; then all go in one step (as many as `budget`
    tokens take). Prompts of `prompt` tokens arrive as a Poisson stream, `arrivals` per step.
    Returns (steps a prompt is held, prompts released with it), each the mean as a prompt sees it.

    A hold starts at a prompt's arrival and ends at min(K, T_m): K = hold_steps, T_m the
    arrival of the m-th prompt after it, m = (threshold - gen) / prompt - 1 (fractional m:
    linear between the whole counts on either side, as prompts' lengths vary about the mean;
    m = infinity where the prompts needed would not fit the budget, so only the steps end it).
    With N(t) the arrivals after t steps (Poisson, mean a t) and q_j = P(N(K) > j):
      E[hold] = sum_{j<m} q_j / a,  E[sum of the others' shorter holds] = sum_{j<m} j q_j / a,
      prompts per release k = 1 + min(N(K), m): E[k] = 1 + sum_{j<m} q_j and
      E[k^2] = 1 + sum_{j<m} (2 j + 3) q_j (E[X^2] = sum_j (2 j + 1) P(X > j)).
    A prompt's mean hold is E[hold + sum of others'] / E[k] = sum_{j<m} (j + 1) q_j / (a E[k])
    (K when prompts are rare), and the release it sees holds E[k^2] / E[k] prompts (a step's
    cost is linear in its prompts, so the size-biased mean prices the step a prompt sees)."""
    gen = np.asarray(gen, float)
    a = np.maximum(np.asarray(arrivals, float), 1e-12)
    mu = a * hold_steps
    shape = np.broadcast(gen, mu).shape
    need = (threshold - gen) / max(prompt, 1e-30)          # prompts whose tokens reach the threshold
    fits = np.floor((budget - gen) / max(prompt, 1e-30))   # prompts one step takes beside the decodes
    top = float(np.max(mu))
    J = int(math.ceil(top + 12.0 * math.sqrt(top) + 30.0))  # N(K) > J has probability < 1e-16
    m = np.where(np.ceil(need) > fits, float(J), np.clip(need - 1.0, 0.0, float(J)))
    m = np.broadcast_to(m, shape)
    j = np.arange(J + 1, dtype=float).reshape((-1,) + (1,) * len(shape))
    logpmf = j * np.log(np.maximum(mu, 1e-300)) - mu - np.cumsum(np.log(np.maximum(j, 1.0)), axis=0)
    pmf = np.exp(logpmf)
    q = np.flip(np.cumsum(np.flip(pmf, 0), 0), 0) - pmf     # P(N > j), summed from the tail
    lo = np.floor(m)
    w = np.where(j < lo, 1.0, np.where(j < lo + 1.0, m - lo, 0.0))   # j < m, linear at the fraction
    s0, s1 = np.sum(w * q, axis=0), np.sum(w * j * q, axis=0)
    steps = (s0 + s1) / (a * (1.0 + s0))
    k = (1.0 + 2.0 * s1 + 3.0 * s0) / (1.0 + s0)
    return steps, k


def rows_alone(sm: StepModel, sched: Scheduler) -> bool:
    """Whether each column of the solver's evaluations on (rows, points) arrays is computed alone
    (`_State.columnwise`): not where batch waiting sizes its Poisson sums by the largest rate in
    the call (`batch_wait`; TensorRT-LLM waits only on one rank)."""
    return not (bool(filled(sched.batch_wait_steps) and filled(sched.batch_wait_ratio)) and sm.ranks == 1)


class _State:
    """The steady figures at a mean of b decoding sequences, for mean lengths S, T."""

    def __init__(self, sm: StepModel, sched: Scheduler, S: float, T: float, closed: bool, beams: int = 1):
        self.sm, self.sched, self.S, self.T, self.closed = sm, sched, S, T, closed
        # beam search: a request decodes `beams` sequences after one prefill; the state counts
        # sequences (b, x: sequences completed a second, W per request), solve() converts at its edge
        self.W = float(beams)
        self.D = max(T - 1.0, 1e-9)
        # the pairs a decoding sequence attends to (holds), averaged over its decode contexts
        # S .. S+T-1 exactly (estimate's T steps; sliding windows make u(L) piecewise linear)
        self.u_mean = sm.mean_attended(S, max(T, 1.0))
        self.h_mean = sm.mean_held(S, max(T, 1.0))
        self.u_S = sm.held(S)                                  # a prompt's KV, read and written
        self.pairs_S = causal_pairs(sm.groups, S)              # its attention's causal pairs
        self.index_S = causal_pairs(sm.held_groups, S)         # its indexer's
        self.P = float(filled(sched.token_budget))
        # a scheduler that takes in requests once every k decode steps makes an arrival wait
        # (k - 1) / 2 steps on average, while a batch decodes (others >= 1; an idle one polls at once)
        self.recv_wait = (filled(sched.recv_interval_steps) - 1.0) / 2.0

    def __call__(self, b, N=1.0):
        """An arriving prompt and a decoding sequence see the others: b (N - 1) / N of them in a
        closed loop of N clients, b in an open one. (TPOT, tau_d, tau_m, f, X, TTFT, the
        prompt's own chunks, whether the prefill work fits the budget.)"""
        sm, S, D = self.sm, self.S, self.D
        others, avail, pbar = self.budget(b, N)
        c0 = minimum(S, avail) if self.sched.chunked_prefill else S + 0.0 * b
        c = minimum(maximum(c0, pbar), avail)
        f = minimum(pbar / maximum(c, 1e-30), 1.0)
        tau, tau_d, tau_m, tau_own, pre = self._steps(b, others, c0, c, f)
        half = 0.5 * tau          # an arrival's mean wait for the running step to end
        if not self.closed and S > 0:      # Poisson arrivals: a step takes the prompts that came during the last
            tau, tau_m, f, half, own = self._clumped(b, others, avail, pbar, tau_d)
            pre = pre * own
        x = b * sm.tokens_per_step / (D * tau)
        rho = minimum(pbar / maximum(avail, 1e-30), 0.999)
        # an arrival waits for the running step to end (half a step on average; the clumped steps of
        # Poisson arrivals, length-biased), except in a closed loop with no host time, where requests
        # arrive as others complete, at a boundary; in a closed loop it waits only while others run
        # (a lone client finds the engine idle)
        host = sm.host(S)
        residual = (0.0 if host == 0.0 else half * minimum(others, 1.0)) if self.closed else half
        balance = _balance_wait(sm.ranks, filled(self.sched.dp_balance_steps), b, x * tau / self.W, tau)
        held, released = self._held(others, x * tau / self.W, tau_d, c0, avail, tau_own)
        ttft = host + residual + pre + rho / (2.0 * (1.0 - rho)) * pre + balance \
            + (self.recv_wait + sm.lookahead) * tau * minimum(others, 1.0) + held + released
        pre = pre + released
        return tau / sm.tokens_per_step, tau_d, tau_m, f, x, ttft, pre, pbar <= avail

    def budget(self, b, N=1.0):
        """(the others a sequence sees, as `__call__`; the token budget a step leaves for prompt
        tokens beside their decodes; the prefill tokens per decode step their prompts need)."""
        sm = self.sm
        others = b * (N - 1.0) / N if self.closed else b
        avail = self.P - (others * sm.positions if self.sched.mixed_steps else 0.0)
        pbar = others * self.S * sm.tokens_per_step / (self.D * self.W)
        return others, avail, pbar

    @property
    def pointwise(self) -> bool:
        """Whether each element of an evaluation is computed alone, whatever is evaluated beside it,
        a single point (floats) included: `columnwise`, and not under Poisson arrivals, whose clumped
        steps sum over chunks (`_clumped`) in one order along a column and in another for one point."""
        return self.closed and self.columnwise

    @property
    def columnwise(self) -> bool:
        """Whether each column of an evaluation on (rows, points) arrays is computed alone, whatever
        columns are evaluated beside it: not where batch waiting sizes its Poisson sums by the
        largest rate in the call (`batch_wait`). The clumped steps of Poisson arrivals sum over
        their chunks along a first axis, one column at a time."""
        return rows_alone(self.sm, self.sched)

    def _clumped(self, b, others, avail, pbar, tau_d):
        """The steps of Poisson arrivals (open loop): a step takes, within the token budget, the
        prompts that arrived during the step before, and a step's cost is convex in its prompt
        tokens (max(memory, compute): the first tokens of a chunk hide under the decodes' memory
        time, the rest cost compute), so prompts that come together cost more than the same prompts
        spread one a step (the spread-chunk mean of `_steps`, which the closed loop keeps). The
        prompts K a step takes form a Markov chain: K' ~ Poisson(rate x the step K made), a long
        step gathering more (a = pbar / S prompts a step on average); its law is found from
        K ~ Poisson(a) by CLUMP_ROUNDS rounds of that map, a mixture of Poissons, over K = 0 ..
        CLUMP_POINTS - 1 and the rest as one chunk at its conditional mean count. The tokens
        beyond the largest chunk (the budget; whole prompts without chunked prefill) carry to extra
        full steps. Returns (the mean step, the mean step carrying prompt tokens, the share of
        decode steps carrying some, an arrival's mean wait for the running step (length-biased:
        E[dur^2] / 2 E[dur]), and its own prefill step over one with its prompt alone (size-biased:
        a prompt lands in a step of k prompts with probability k p_k / a))."""
        S = self.S
        cmax = self.full_chunk(avail)
        a = np.asarray(pbar, float) / S
        shape = np.shape(a)
        cfull = np.broadcast_to(cmax, shape)[None]
        w, counts = _poisson_mix(a[None], np.ones((1,) + shape), CLUMP_POINTS)
        mixed = self.sched.mixed_steps
        chunk = None
        for rnd in range(CLUMP_ROUNDS + 1):
            last, chunk = chunk, np.minimum(counts * S, cmax)
            if last is None or chunk.tobytes() != last.tobytes():   # the same chunks: the same steps
                dur = self._chunk_step(b, others, np.concatenate([chunk, cfull], axis=0))
            dur_k, dur_full = dur[:-1], dur[-1]
            if mixed:        # a step with K prompts is a decode step too (K = 0: tau_d)
                dur_k = np.concatenate([np.broadcast_to(tau_d, shape)[None], dur_k[1:]], axis=0)
                cycle = dur_k
            else:            # a prefill step apart, after the decode step it waited for
                cycle = np.concatenate([np.broadcast_to(tau_d, shape)[None], tau_d + dur_k[1:]], axis=0)
            if rnd == CLUMP_ROUNDS:
                break
            mean_cycle = np.maximum(np.sum(w * cycle, axis=0), 1e-300)
            w, counts = _poisson_mix(a * cycle / mean_cycle, w, CLUMP_POINTS)
        carry = np.maximum(pbar - np.sum(w * chunk, axis=0), 0.0) / np.maximum(cmax, 1e-30)   # extra full steps
        if mixed:
            time = np.sum(w * dur_k, axis=0) + carry * dur_full
            steps = 1.0 + carry
            sq = np.sum(w * dur_k ** 2, axis=0) + carry * dur_full ** 2
            carrying = (time - w[0] * tau_d) / np.maximum(steps - w[0], 1e-30)
        else:
            alone = np.sum(w[1:] * dur_k[1:], axis=0) + carry * dur_full
            time, steps = tau_d + alone, 1.0
            sq = tau_d ** 2 + np.sum(w[1:] * dur_k[1:] ** 2, axis=0) + carry * dur_full ** 2
            carrying = alone / np.maximum(1.0 - w[0] + carry, 1e-30)
        f = np.minimum((1.0 - w[0] + carry) / steps, 1.0)
        half = sq / np.maximum(2.0 * time, 1e-30)
        took = np.maximum(np.sum(w[1:] * counts[1:], axis=0), 1e-30)
        own = np.sum(w[1:] * counts[1:] * dur_k[1:], axis=0) / took / np.maximum(dur_k[1], 1e-30)
        own = np.where(a > 1e-12, np.maximum(own, 1.0), 1.0)
        return time / steps, carrying, f, half, own

    def full_chunk(self, avail):
        """The most prompt tokens a step takes when prompts wait: the room `avail` (chunked prefill), else
        as many whole prompts of the mean length as fit, at least one."""
        return avail if self.sched.chunked_prefill else np.maximum(np.floor(avail / self.S), 1.0) * self.S

    def _chunk_step(self, b, others, c):
        """A step carrying c prompt tokens (whole prompts' shares of the KV and the pairs): beside
        the decodes (averaged over a decoding sequence's contexts, as `_steps`) where steps mix,
        alone where they do not. c: an array whose first axis lists chunks."""
        sm, S = self.sm, max(self.S, 1.0)
        share = c / S
        if self.sched.mixed_steps:
            return sm.step_over_context(others, self.u_mean, self.S, self.T, c, share * self.u_S,
                                        share * self.pairs_S, h=self.h_mean, hp=share * self.index_S)
        return sm.step(0.0 * b, self.u_mean, c, share * self.u_S, share * self.pairs_S, seqs=share,
                       hp=share * self.index_S)

    def _held(self, others, arrivals, tau_d, c0, avail, tau_own):
        """Batch waiting (Scheduler.batch_wait_*): the seconds a prompt is held while the others
        decode (steps of tau_d), and what its first prefill step costs beyond tau_own for the
        prompts released with it (`batch_wait`: k of them, as a prompt sees it). Both are weighted
        by min(others, 1): with nothing decoding, prompts go at once. arrivals: per step."""
        sm, sched = self.sm, self.sched
        hold, ratio = filled(sched.batch_wait_steps), filled(sched.batch_wait_ratio)
        if not (hold and ratio) or sm.ranks > 1:       # TensorRT-LLM waits only with both, never under DP
            return 0.0, 0.0
        gen = others * sm.positions
        steps, k = batch_wait(hold, ratio * self.P, self.P, self.S, gen, arrivals)
        c = np.minimum(k * c0, np.maximum(avail, c0))     # the released prompts' first chunks
        tau_rel = self._own_step(others, c, k)      # as the prompt's own step (tau_own), with k prompts
        gate = np.minimum(others, 1.0)
        return gate * steps * tau_d, gate * (tau_rel - tau_own)

    def _own_step(self, others, c, prompts=None):
        """A step carrying c tokens of the prompt (its share of the KV and the pairs) beside the
        others' decodes where steps mix (alone where they do not); `prompts`: the prompts the c
        tokens belong to, where not the one."""
        sm, S = self.sm, max(self.S, 1.0)
        share = c / S
        kw = dict(cu=share * self.u_S, cp=share * self.pairs_S, hp=share * self.index_S)
        if self.sched.mixed_steps:
            return sm.step(others, self.u_mean, c, h=self.h_mean, seqs=None if prompts is None else others + prompts,
                           **kw)
        return sm.step(0.0 * others, self.u_mean, c, seqs=1.0 if prompts is None else prompts, **kw)

    def _steps(self, b, others, c0, c, f):
        """The mean step, the decode step, the step with a prefill chunk c, the prompt's own (c0),
        and the seconds of the prompt's own prefill steps: S // c0 full chunks (tau_own each) and a
        last one of the S mod c0 tokens left (one step of c0 where S = 0). Each chunk carries its
        share of the prompt's KV and attention pairs (by its tokens), so the chunks' pairs sum to the
        prompt's: a prompt within the budget is one step, core's prefill of it.
        The steps, as rows: a decoding sequence's step averaged over its own decode contexts (the
        others at their mean; `StepModel.step_over_context`), the step with the chunk c likewise
        where steps mix (else a step of the chunk alone: `StepModel.step`), the prompt's own steps
        (`_own_step`). Arrays are evaluated as one stack of rows (`_stacked_steps`), each element
        computed as alone."""
        S, mixed = self.S, self.sched.mixed_steps
        full = rest = None
        chunks = [0.0, c, c0]
        if S > 0:
            c0_ = maximum(c0, 1.0)
            full = floor(S / c0_)
            rest = S - full * c0_
            if np.ndim(rest) or rest > 0.0:      # a number rest of 0 has no step (`where` below: 0)
                chunks.append(rest)
        n = len(chunks)
        share = [x / max(S, 1.0) for x in chunks]
        one = 1.0 + others
        if mixed:       # the prompt's tokens beside the others' decodes
            dec, prompts = [one, one] + [others] * (n - 2), [(x > 0) * 1.0 for x in chunks]
            h, over = [self.h_mean] * n, 2
        else:           # a decode step, then the chunk's and the prompt's own steps alone
            dec = [one, 0.0 * b] + [0.0 * others] * (n - 2)
            prompts = [0.0, share[1] - dec[1]] + [1.0 - dec[2]] * (n - 2)
            h, over = [self.h_mean] + [0.0] * (n - 1), 1
        rows = (dec, chunks, prompts, [x * self.u_S for x in share], [x * self.pairs_S for x in share],
                [x * self.index_S for x in share], h)
        if np.ndim(one) or np.ndim(c):
            t = self._stacked_steps(rows, others, over, np.broadcast(one, dec[1], c0, c).shape)
        else:           # numbers: each row as numbers (their own float paths)
            t = [self._step_rows(tuple(col[i] for col in rows), others, i < over) for i in range(n)]
        tau_d, tau_m, tau_own = t[0], t[1], t[2]
        tau = (1.0 - f) * tau_d + f * tau_m if mixed else tau_d + f * tau_m
        pre = tau_own if full is None else full * tau_own + (where(rest > 0.0, t[3], 0.0) if n > 3 else 0.0)
        return tau, tau_d, tau_m, tau_own, pre

    def _step_rows(self, rows, others, over_context: bool, staged=None):
        """Steps given as rows (decoding sequences, chunk tokens, prompts, their KV pairs, causal
        pairs, indexer pairs, held pairs h; floats, or arrays stacked along a first axis): averaged
        over a decoding sequence's own contexts (`StepModel.step_over_context`, others beside it)
        or one step (`StepModel.step`), the drafter's rounds added. staged: the rows' pass
        (`StepModel.pass_of`), where the caller has it."""
        sm = self.sm
        dec, c, _, cu, cp, hp, h = rows
        p, m, beat = sm.pass_of(*rows[:6]) if staged is None else staged
        if over_context:
            t = sm.over_context_of(p, m, beat, others, self.u_mean, self.S, self.T, h)
            return t if sm.draft is None else t + sm.draft.step_over_context(others, self.u_mean, self.S, self.T, c,
                                                                             cu, cp, h, hp)
        t = sm.step_of(p, m, beat, dec, self.u_mean, h)
        return t if sm.draft is None else t + sm.draft.step(dec, self.u_mean, c, cu, cp, h, hp)

    def _stacked_steps(self, rows, others, over: int, shape: tuple[int, ...]) -> np.ndarray:
        """`_step_rows` of all the rows at once, one pass for them all: the first `over` averaged
        over the contexts."""
        st = _stack(shape, *rows)
        p, m, beat = self.sm.pass_of(*st[:6])
        top, low = slice(0, over), slice(over, len(rows[0]))
        oth = np.broadcast_to(others, st[0][top].shape)
        d = st[0].ndim
        return np.concatenate([
            self._step_rows(tuple(x[top] for x in st), oth, True, (_rows(p, top, d), _row(m, top, d), _row(beat, top, d))),
            self._step_rows(tuple(x[low] for x in st), others, False,
                            (_rows(p, low, d), _row(m, low, d), _row(beat, low, d)))])


def _stack(shape: tuple[int, ...], *columns: list) -> tuple[np.ndarray, ...]:
    """Each list of floats or arrays (each broadcasting to `shape`) as one array of its entries
    stacked along a first axis."""
    out = []
    for col in columns:
        a = np.empty((len(col), *shape))
        for i, x in enumerate(col):
            a[i] = x
        out.append(a)
    return tuple(out)


def _row(x, rows: slice, ndim: int):
    """The rows of a figure evaluated on `_stack`ed arguments of `ndim` dimensions (a float, or an
    array of fewer: a figure of a stack's constants alone (`serving.curve`), the same for all rows)."""
    return x[rows] if isinstance(x, np.ndarray) and x.ndim == ndim else x


def _rows(p: Pass, rows: slice, ndim: int) -> Pass:
    """The rows of a pass evaluated on `_stack`ed arguments of `ndim` dimensions."""
    return Pass(*(_row(x, rows, ndim) for x in p))


def _closed_loop(state: _State, concurrency, cap: float | np.ndarray) -> tuple:
    """N clients hold N = b + X TTFT (Little): b where that holds, or the cap with the rest queued."""
    N = np.asarray(concurrency, float)
    hi = np.minimum(N, cap)
    found = None
    if N.size == 1 and state.pointwise:     # one load, at single points (`_closed_point`)
        n = float(N.reshape(-1)[0])
        found = _closed_point(state, n, float(hi.reshape(-1)[0]))
    if found is None:
        return _queued(state, N, *_closed_rounds(state, N, hi))
    return tuple(np.full(N.shape, v) if N.ndim else np.float64(v) for v in _queued(state, n, *found))


def _queued(state: _State, N, b, figures: tuple, capped):
    """`_closed_loop`'s figures at b decoding sequences (the state's `figures` there; `capped`:
    whether b is the cap): where fewer than the N clients are held, the rest queue."""
    tau, tau_d, tau_m, f, x, ttft, pre, _ = figures
    # the prefill budget binds before the clients are all served (b + X TTFT < N where the
    # root stopped at the budget's edge): b is the most the budget sustains and the rest queue,
    # as at the cap (Little's law over all N clients would count the queue as decoding)
    full = capped | (b + x * ttft < N * (1.0 - 1e-6))
    ttft = where(full, maximum((N - b) / x, ttft), ttft)
    x = where(full, x, N / (ttft + state.D * tau))      # Little's law, exact at the root
    return b, tau, tau_d, tau_m, f, x, ttft, pre


def _closed_rounds(state: _State, N: np.ndarray, hi: np.ndarray) -> tuple:
    """(b, the state's figures there, whether b is the cap) of `_closed_loop` by `_root`'s rounds,
    every element at once (one load: `_root_ahead`)."""
    def below(b, n):
        tau, _, _, _, x, ttft, _, ok = state(b, n)
        return ok & (b + x * ttft < n)
    if state.pointwise and N.size == 1:     # the same figures in fewer evaluations (`_root_ahead`)
        root, at_hi, at_root, _ = _root_ahead(state, _held_below, N * 1e-9, hi, N)
    else:
        at_hi, at_root = _on_column(state, hi, N), None
    capped = _capped(at_hi, hi, N)
    if at_root is None:
        root = _root(below, N * 1e-9, hi, N)
    b = np.where(capped, hi, root)
    figures = (at_hi if capped else at_root) if at_root is not None else _on_column(state, b, N)
    return b, figures, capped


def _on_column(state: _State, b, N) -> tuple:
    """The state's figures at b among N clients (arrays of one shape), a list of loads evaluated
    as a column (n, 1) as `_root` evaluates its grids (n, points): a step model whose constants
    are a stack's columns (n, 1) (`serving.curve`, several configurations at once) takes them
    row by row. Each element is computed alone, so the figures are those of b and N as given."""
    if np.ndim(N) != 1:
        return state(b, N)
    return tuple(x[:, 0] if np.ndim(x) == 2 else x for x in state(b[:, None], N[:, None]))


def _closed_point(state: _State, n: float, hi: float) -> tuple | None:
    """(b, the state's figures there, whether b is the cap) of `_closed_loop` for one load of n
    clients, from the state at single points in plain floats, `_root`'s root found by `_point_root`.
    Where the step's floats are not its arrays' to the bit (`StepModel.float_exact`), the answer is
    checked and its figures taken from one evaluation of arrays (`_on_arrays`). None where the root
    is not verified (the caller then takes `_root`'s rounds)."""
    probes = _Probes(_closed_test(state, n), n * 1e-9)
    at_hi = probes.at(hi)
    if _capped(at_hi, hi, n):
        found: tuple | None = (hi, at_hi, True)
    else:
        root = _point_root(probes, n * 1e-9, hi)
        found = None if root is None else (*root, False)
    if found is None or state.sm.float_exact:
        return found
    return _on_arrays(state, n, hi, found, probes)


def _capped(figures: tuple, hi, n):
    """Whether the cap hi holds the n clients (the state's figures there): b = hi, the rest queue."""
    _, _, _, _, x, ttft, _, ok = figures
    return ok & (hi + x * ttft <= n)


def _on_arrays(state: _State, n: float, hi: float, found: tuple, probes: _Probes) -> tuple | None:
    """`_closed_point`'s answer `found` (b, figures, capped) for a step whose floats may differ from
    its arrays' in the last bit: hi and, below the cap, b and the two points that verified it (the
    largest b where the test held, the smallest where it failed) evaluated as one array; the
    arrays' answer where their test agrees, else None."""
    b, _, capped = found
    points = [hi] if capped else [hi, b, probes.held, probes.failed]
    figures = state(np.array([points]), np.array([[n]]))
    at = [_column(figures, i, ()) for i in range(len(points))]
    if _capped(at[0], hi, n):
        return hi, at[0], True
    if capped or not _held_below(at[2], probes.held, n)[0] or _held_below(at[3], probes.failed, n)[0]:
        return None
    return b, at[1], False


def _closed_test(state: _State, n: float):
    """`_closed_loop`'s test at b decoding sequences among n clients (a float): b -> (the state's
    figures, whether they hold fewer than n within the prefill budget (`_held_below`), a margin
    continuous in b, positive where that holds: -log of the larger of b + X TTFT over n and the
    prefill tokens a decode step needs over the budget it leaves, each about proportional to b)."""
    def evaluate(b: float) -> tuple[tuple, bool, float]:
        figures = state(b, n)
        below, margin = _held_below(figures, b, n)
        _, avail, pbar = state.budget(b, n)
        ratio = max(1.0 - margin / n, pbar / avail if avail > 0.0 else math.inf)
        return figures, bool(below), -math.log(ratio) if ratio > 0.0 else math.inf
    return evaluate


class _Probes:
    """A test's evaluations at single points b (`_closed_test`: b -> (figures, whether the test
    holds, its margin)): the largest b where it held, the smallest where it failed, the margins."""

    def __init__(self, evaluate, lo: float):
        self.evaluate, self.lo = evaluate, lo       # lo: the bottom of the search
        self.held, self.failed = -math.inf, math.inf
        self.seen: dict[float, tuple] = {}
        self.margins: list[tuple[float, float]] = []     # (b, margin), as evaluated

    def at(self, b: float) -> tuple:
        """The figures at b (evaluated once)."""
        if b not in self.seen:
            figures, below, margin = self.evaluate(b)
            self.seen[b] = figures
            if below:
                self.held = max(self.held, b)
            else:
                self.failed = min(self.failed, b)
            self.margins.append((b, margin))
        return self.seen[b]

    def inside(self, b: float) -> float:
        """b where it is in (held, failed], where the test turns; where it misses by a rounding
        (1e-12), the nearest point of it; else the geometric middle of those."""
        lo, hi = max(self.held, self.lo), self.failed
        if lo < b <= hi:
            return b
        if hi < b <= hi * (1.0 + 1e-12):
            return hi
        if lo * (1.0 - 1e-12) <= b <= lo:
            return math.nextafter(lo, math.inf)
        return math.sqrt(lo * hi)


def _point_root(probes: _Probes, lo: float, hi: float) -> tuple[float, tuple] | None:
    """`_root(below, lo, hi, n)` of `_closed_loop`'s test (below) to the bit, and the state's
    figures there, in a few evaluations at single points, for a test that turns false once (at some
    b*), as `_root` asks. `_root`'s answer is fixed by its rounds' counts of grid points below b*:
    from an estimate of b* (`_guess`), `_brackets` predicts them, and they are `_root`'s where no
    round's grid point lies strictly between a b where the test held and one where it failed.
    Those two are found among the evaluations, or the predicted brackets' ends are evaluated
    (after the root's own point). None where three estimates leave the counts unverified."""
    guess = _guess(probes, hi)
    for _ in range(3):
        brackets = _brackets(lo, hi, guess, ROOT_STEPS, ROOT_ROUNDS)
        low, high = max(a for a, _ in brackets), min(c for _, c in brackets)
        root = math.sqrt(brackets[-1][0] * brackets[-1][1])         # as `_root`: sqrt(lo * hi)
        probes.at(root)
        if probes.held < low:
            probes.at(low)
        if probes.failed > high and probes.held >= low:
            probes.at(high)
        if probes.held >= probes.failed:          # not a test that turns once
            return None
        if low <= probes.held and probes.failed <= high:
            return root, probes.at(root)
        guess = probes.inside(_estimate(probes.margins))
    return None


def _guess(probes: _Probes, hi: float) -> float:
    """An estimate of where the margin of `_Probes` crosses 0 below hi, hi evaluated: from the
    line of slope -1 in log b through hi (the margin of a ratio proportional to b), then the zero
    of the quadratic through the last three points (`_estimate`), each evaluated, until the next
    estimate moves less than 1e-4 from the last point: the error shrinks superlinearly, so it is
    then about that move times the one before (the served margins, nearly lines in log b: 1e-10,
    within the last round's brackets of 6e-9; `_point_root` checks it and estimates again where it
    is not)."""
    top = probes.margins[-1][1]
    points = [(hi * math.e, top - 1.0), (hi, top)]
    for _ in range(GUESS_STEPS):
        b = probes.inside(_estimate(points))
        if abs(b - points[-1][0]) <= 1e-4 * b or b in probes.seen:
            return b
        probes.at(b)
        points.append(probes.margins[-1])
    return probes.inside(_estimate(points))


def _estimate(points: list[tuple[float, float]]) -> float:
    """Where the margin is 0 by log b as a polynomial in the margin through the last three
    (b, margin) points, or the line through two (`_inverse_interpolation`; nan where it has none)."""
    t = _inverse_interpolation([(math.log(b), m) for b, m in points[-3:]])
    return math.exp(min(t, 700.0)) if math.isfinite(t) else math.nan


def _inverse_interpolation(points: list[tuple[float, float]]) -> float:
    """Where b(margin), the polynomial through the (b, margin) points (two: a line, three: a
    quadratic), has margin 0 (Lagrange's form; nan where two margins are equal)."""
    b = 0.0
    for i, (bi, mi) in enumerate(points):
        w = bi
        for k, (_, mk) in enumerate(points):
            if k != i:
                if mi == mk:
                    return math.nan
                w *= mk / (mk - mi)
        b += w
    return b


def _held_below(figures, b, n):
    """`_closed_loop`'s test of b decoding sequences among n clients, from the state's figures there:
    (whether they hold fewer than n, b + X TTFT < n; the margin n - b - X TTFT, continuous in b)."""
    _, _, _, _, x, ttft, _, ok = figures
    held = b + x * ttft
    return ok & (held < n), n - held


def _open_loop(state: _State, arrival_rate, cap: float):
    """Poisson arrivals at a rate: b where the engine completes that rate (below its capacity, the
    most it completes at any b of a geometric grid up to the cap). One rate: `_root`'s answer by
    `_root_ahead` (`_State.columnwise`), and the capacity above the rate shown by a point of the
    grid about the root that completes more (evaluated beside a round; the figures are numbers, so
    the grid's largest is at least that), the whole grid evaluated only where none shows it."""
    lam = np.asarray(arrival_rate, float)
    grid = cap * np.geomspace(1e-6, 1.0, 200)
    lo, hi = np.full(lam.shape, 1e-9), np.full(lam.shape, cap)
    shown = False
    if lam.size == 1 and state.columnwise:
        def about(low: float, high: float) -> np.ndarray:       # the grid's points in a bracket, one beyond
            i, j = np.searchsorted(grid, [low, high])
            return grid[i:j + 1]
        b, _, _, near = _root_ahead(state, _rate_below, lo, hi, lam, beside=about, at_root=False)
        shown = near is not None and bool(np.any(near[7] & (near[4] > lam)))
    if not shown:
        _, _, _, _, x, _, _, ok = state(grid)
        capacity = float(np.max(np.where(ok, x, 0.0)))
        if not np.all(lam < capacity):
            raise InvalidInputError("arrival_rate", float(np.max(lam)), f"below the engine's capacity, "
                                    f"{capacity:.4g} requests/s here (the queue would grow without end)")
    if not (lam.size == 1 and state.columnwise):
        b = _root(lambda b, rate: _rate_below(state(b), b, rate)[0], lo, hi, lam)
    tau, tau_d, tau_m, f, x, ttft, pre, _ = state(b)
    return b, tau, tau_d, tau_m, f, lam + 0.0 * b, ttft, pre


def _rate_below(figures, b, rate):
    """`_open_loop`'s test at b decoding sequences, from the state's figures there: (whether the
    engine completes fewer than `rate` requests/s within the prefill budget; the margin log(rate / X),
    continuous in b and, X being about proportional to b below saturation, about a line in log b)."""
    _, _, _, _, x, _, _, ok = figures
    return ok & (x < rate), np.log(rate) - np.log(np.maximum(x, 1e-300))


def solve(sm: StepModel, sched: Scheduler, prompt: float, output: float, *, concurrency=None,
          arrival_rate=None, beams: int = 1) -> Steady:
    """The steady state for mean lengths `prompt`, `output` (see the module docstring).
    concurrency or arrival_rate may be numpy arrays (vectorised). beams: beam search's width, each
    request decoding that many sequences after one prefill, sharing its prompt's KV (b and cap
    count sequences, x requests; output tokens are the requests')."""
    closed = concurrency is not None
    state = _State(sm, sched, float(prompt), float(output), closed, beams)
    cap, kv_pairs = _running_cap(state, prompt)
    W = float(beams)
    b, tau, tau_d, tau_m, f, x, ttft, pre = (_closed_loop(state, np.asarray(concurrency, float) * W, cap) if closed
                                             else _open_loop(state, np.asarray(arrival_rate, float) * W, cap))
    return Steady(b, tau, tau_d, tau_m, f, x / W, ttft, pre, cap, kv_pairs, state.u_mean, state.h_mean)


def closed_cap(sm: StepModel, sched: Scheduler, prompt: float, output: float) -> tuple[float, float]:
    """`solve`'s closed loop's running-sequence cap and the KV pairs a chip holds, at mean lengths
    `prompt`, `output` (its errors where not one request fits)."""
    return _running_cap(_State(sm, sched, float(prompt), float(output), True), prompt)


def solve_stack(stack: StepModel, sched: Scheduler, prompt: float, output: float, concurrency: np.ndarray,
                caps: list[tuple[float, float]]) -> list[Steady]:
    """`solve`'s closed loop of G configurations at once, at the client counts `concurrency` (C of
    them) each: `stack`, a step model whose constants that differ among them are columns of G x C
    rows (`serving.curve`; one scheduler, as `_State.columnwise`), `caps` their `closed_cap`s. The
    G x C loads go through one `_closed_loop` (its root's rounds on one grid of G x C rows), each row
    computed alone: each Steady is `solve(sm_g, sched, prompt, output, concurrency=concurrency)`'s."""
    state = _State(stack, sched, float(prompt), float(output), True)
    C = concurrency.size
    N = np.tile(np.asarray(concurrency, float), len(caps))
    b, tau, tau_d, tau_m, f, x, ttft, pre = _closed_loop(state, N, np.repeat([cap for cap, _ in caps], C))

    def own(v, g: int):       # configuration g's rows
        return v[g * C:(g + 1) * C] if np.ndim(v) else v
    return [Steady(own(b, g), own(tau, g), own(tau_d, g), own(tau_m, g), own(f, g), own(x, g), own(ttft, g),
                   own(pre, g), cap, kv_pairs, state.u_mean, state.h_mean) for g, (cap, kv_pairs) in enumerate(caps)]


def open_loop_rates(sm: StepModel, sched: Scheduler, prompt: float, output: float, b,
                    beams: int = 1) -> tuple[np.ndarray, ...]:
    """Poisson arrivals' steady figures with b others decoding beside a sequence (an array): (mean
    seconds per output token, requests completed per second, the decode step, the step carrying
    prompt tokens, a prompt's own prefill seconds). The occupancy model of `membound.tails` reads
    the engine's figures as functions of its load from here."""
    state = _State(sm, sched, float(prompt), float(output), False, beams)
    tau, tau_d, tau_m, _, x, _, pre, _ = state(np.asarray(b, float))
    return tuple(np.asarray(v, float) * np.ones(np.shape(b)) for v in (tau, x / float(beams), tau_d, tau_m, pre))


def full_step(sm: StepModel, sched: Scheduler, prompt: float, output: float, b: float,
              beams: int = 1) -> tuple[float, float]:
    """(seconds, prompt tokens) of a step carrying a full chunk (`_State.full_chunk`), as steps run
    while prompts wait for prefill room: beside the b sequences' decodes where steps mix, alone where
    they do not (`_State._chunk_step`, as the open loop's clumped steps price it)."""
    state = _State(sm, sched, float(prompt), float(output), False, beams)
    others, avail, _ = state.budget(float(b))
    c = float(state.full_chunk(avail))
    return float(np.ravel(state._chunk_step(float(b), others, np.array([c])))[0]), c


def finite_run_share(e2e, tau0: float, output: Length, concurrency, runs=10.0) -> np.ndarray:
    """Share of the steady throughput that a finite closed-loop run measures over its whole
    duration: N clients send `runs` x N requests, the first N at once, and the throughput is
    the output tokens over the time until the last request completes (InferenceMAX's protocol).
    `runs` (requests per client) may be an array over the concurrency values.
    e2e: the steady end-to-end time of a request; tau0: one sequence's decode step (seconds).

    The clients start together, so their requests stay nearly in phase: after k = `runs`
    requests a client's last completion is off the mean by the sum of k output lengths'
    deviations, sigma = sqrt(k) std(T) tokens. The last of N clients finishes m_N sigma steps
    after the median one (m_N: the expected largest of N standard normals, Blom's
    approximation), at most half an output length (clients fully out of phase finish spread
    over one request). While the run drains, a step of the shrinking batch costs tau0 per slot
    left idle, and the idle slot-steps come to m_N sigma per client (the area above a normal
    CDF from -m_N sigma to m_N sigma). So the run lasts k e2e + tau0 m_N sigma per client
    instead of k e2e."""
    n = np.asarray(concurrency, float)
    k = np.asarray(runs, float)
    m = np.vectorize(lambda v: NormalDist().inv_cdf((v - 0.375) / (v + 0.25)))(n)
    spread = np.minimum(m * np.sqrt(k) * output.std, output.mean / 2.0)
    e2e = np.asarray(e2e, float)
    return k * e2e / (k * e2e + tau0 * spread)


def run_share(sm: StepModel, st: Steady, output: Length, concurrency, runs=10.0) -> np.ndarray:
    """`finite_run_share` for a solved steady state (its e2e; tau0 = one sequence's decode step
    per token it emits)."""
    e2e = st.ttft + (output.mean - 1.0) * st.tau
    tau0 = float(sm.step(1.0, st.u_mean, h=st.h_mean)) / sm.tokens_per_step
    return finite_run_share(e2e, tau0, output, concurrency, runs)


def _root(below, lo, hi, arg, points: int = ROOT_POINTS, rounds: int = ROOT_ROUNDS):
    """The b in [lo, hi] where `below(b, arg)` turns False (monotone), by refining a geometric
    grid of `points` values per round, all elements at once (lo, hi, arg: arrays of one shape).
    Each round narrows log(hi / lo) by points - 1: the solver's bracket of 1e9 ends at
    ln(1e9) / 23^7 = 6e-9 relative after 7 rounds (5 left 3e-6, enough for a figure to break
    the law "more bandwidth never slows" by 2e-4 at a KV or batch cap)."""
    shape = np.shape(arg)
    lo, hi, arg = (np.atleast_1d(np.asarray(v, float)) for v in (lo, hi, arg))
    lo, hi = np.broadcast_to(lo, arg.shape), np.broadcast_to(hi, arg.shape)
    j = np.linspace(0.0, 1.0, points)
    for _ in range(rounds):
        grid = lo[:, None] * (hi / lo)[:, None] ** j
        n_below = np.sum(below(grid, arg[:, None]), axis=1)
        k = np.clip(n_below, 1, points - 1)
        lo, hi = np.take_along_axis(grid, (k - 1)[:, None], 1)[:, 0], np.take_along_axis(grid, k[:, None], 1)[:, 0]
    b = np.sqrt(lo * hi)
    return b.reshape(shape) if shape else float(b[0])


def _root_ahead(state, test, lo, hi, arg, points: int = ROOT_POINTS, rounds: int = ROOT_ROUNDS,
                beside: Callable[[float, float], np.ndarray] | None = None, at_root: bool = True):
    """`_root` of one element to the bit, in fewer evaluations of `state`: (the root, the state's
    figures at hi, at the root, at `beside`). test(figures, b, arg): `_root`'s below from the state's figures at
    b, and a margin continuous in b, positive where below is (its zero is where below turns).
    The first evaluation takes the first round's grid and hi. Each later one takes the round whose
    bracket is known and, after it, the rounds as they would go were the root where the margin's
    last values put it (`_predicted_root`, `_brackets`; from the first grid's crossing, FIRST_AHEAD
    of them), and that root's point; the rounds are
    checked one after the other as `_root` takes them (each on its own grid, counted alike), the
    first whose bracket the prediction missed ending the count. Every round `_root` takes is thus
    evaluated on its own grid, so the answer is `_root`'s where a point's figures do not depend on
    the points evaluated beside it (`_State.pointwise`, `_State.columnwise`).
    beside: (lo, hi) -> points (one axis), called once with the first bracket of `_root`'s rounds
    (after the first evaluation, so it holds the root); the points are evaluated in the next one and
    their figures come back as a fourth element (None without beside). at_root False: the state is
    not evaluated at the root for it (None in its place)."""
    shape = np.shape(arg)
    lo, hi, arg = (np.atleast_1d(np.asarray(v, float)) for v in (lo, hi, arg))
    j = np.linspace(0.0, 1.0, points)
    chain, last, at_hi, at_beside, first = [(lo, hi)], hi, None, None, True
    extra = np.empty((arg.size, 0))
    for _ in range(rounds):
        grids = [lo_[:, None] * (hi_ / lo_)[:, None] ** j for lo_, hi_ in chain]
        points_b = np.concatenate([*grids, extra, last[:, None]], axis=1)
        figures = state(points_b, arg[:, None])
        flags, margin = test(figures, points_b, arg[:, None])
        if extra.shape[1]:
            at_beside = tuple(x[0, len(grids) * points:-1] if np.ndim(x) == 2 else x for x in figures)
            extra = extra[:, :0]
        if at_hi is None:
            at_hi = _column(figures, -1, shape)
        for i, grid in enumerate(grids):      # as _root's rounds (one element: its row indexed)
            k = min(max(int(np.count_nonzero(flags[0, i * points:(i + 1) * points])), 1), points - 1)
            lo, hi = grid[:, k - 1], grid[:, k]
            rounds -= 1
            if rounds == 0:
                b = np.sqrt(lo * hi)
                at_b = _column(figures, -1, shape) if last[0] == b[0] else \
                    state(b.reshape(shape), arg.reshape(shape)) if at_root else None
                return (b.reshape(shape) if shape else float(b[0])), at_hi, at_b, at_beside
            if i + 1 == len(grids) or chain[i + 1][0][0] != lo[0] or chain[i + 1][1][0] != hi[0]:
                break
        if beside is not None:      # its points about the root's bracket, in the next evaluation
            extra, beside = np.asarray(beside(float(lo[0]), float(hi[0])), float)[None, :], None
        guess = _predicted_root(grid[0], margin[0, i * points:(i + 1) * points], k, flags[0, i * points])
        ahead = [(np.array([a]), np.array([c])) for a, c in _brackets(float(lo[0]), float(hi[0]), guess, j, rounds)]
        after = ahead.pop()           # the rounds left, and the bracket they leave
        if first and 0.0 < guess < math.inf:      # a crossing read off the coarse first grid
            ahead = ahead[:FIRST_AHEAD]
        chain, last, first = [(lo, hi), *ahead], np.sqrt(after[0] * after[1]), False
    raise AssertionError("unreachable: each evaluation takes at least one round")


def _column(figures: tuple, i: int, shape: tuple[int, ...]) -> tuple:
    """The figures of one column of a (1, points) evaluation, shaped as `shape` (one element)."""
    return tuple(x[:, i].reshape(shape)[()] if np.ndim(x) == 2 else x for x in figures)


def _brackets(lo: float, hi: float, guess: float, j: np.ndarray, count: int) -> list[tuple[float, float]]:
    """The (lo, hi) brackets of `_root`'s next `count` rounds from (lo, hi) were `below` true
    exactly below `guess` (numbers; each grid computed as `_root` computes it, on steps j). A grid
    is sorted (its points are at least 1e-10 apart, relative, in 7 rounds from a range of 1e9;
    pow errs by ulps), so the points below guess are the first bisect_left of them."""
    out = []
    for _ in range(count):
        grid = (lo * (hi / lo) ** j).tolist()
        k = min(max(bisect_left(grid, guess), 1), len(grid) - 1)
        lo, hi = grid[k - 1], grid[k]
        out.append((lo, hi))
    return out


def _predicted_root(grid: np.ndarray, margin: np.ndarray, k: int, first_below: bool) -> float:
    """Where a margin sampled on a geometric grid crosses 0 in [grid[k-1], grid[k]]: inverse
    interpolation of log b over the (up to) four points about the crossing (beyond the grid
    where the margin does not cross in it)."""
    if k == grid.size - 1 and margin[-1] > 0:
        return math.inf
    if k == 1 and not first_below:
        return 0.0
    idx = [i for i in range(max(k - 2, 0), min(k + 2, grid.size))]
    ys, xs = margin[idx], np.log(grid[idx])
    if not (np.all(np.isfinite(ys)) and np.all(np.diff(ys) < 0)):     # not a clean crossing: the middle
        ys, xs = margin[[k - 1, k]], np.log(grid[[k - 1, k]])
        if not (np.all(np.isfinite(ys)) and ys[0] > ys[1]):
            return float(np.sqrt(grid[k - 1] * grid[k]))
    x = 0.0                                     # Lagrange's polynomial of x in y, at y = 0
    for a in range(len(ys)):
        w = 1.0
        for c in range(len(ys)):
            if c != a:
                w *= (0.0 - ys[c]) / (ys[a] - ys[c])
        x += w * xs[a]
    low, high = math.log(grid[k - 1]), math.log(grid[k])      # the crossing is in this bracket
    return math.exp(min(max(x, low), high)) if math.isfinite(x) else float(np.sqrt(grid[k - 1] * grid[k]))
