"""The iteration-level simulator: a seeded run of the same engine over sampled requests."""
from __future__ import annotations

import heapq
from collections import deque
from dataclasses import dataclass

import numpy as np

from ..errors import InvalidInputError
from ..physics.roofline import causal_pairs, effective_context
from ..base.workbudget import WorkBudget
from .scheduler import Scheduler, filled
from .solver import kv_room, kv_room_knobs
from .step import StepModel


@dataclass
class Trace:
    """What `simulate` returns: each request's arrival, admission, first-token and last-token times, the
    inter-token gaps as runs of equal steps, and the integrals the result's means come from."""
    arrive: np.ndarray
    admit: np.ndarray
    first: np.ndarray
    done: np.ndarray
    itl: list[tuple[np.ndarray, np.ndarray]]   # (durations, weights) of runs of steps
    busy: float = 0.0  # integral of running batch over time
    kv: float = 0.0    # integral of KV occupancy over time
    preemptions: int = 0


def _check_simulable(sm: StepModel, sched: Scheduler) -> None:
    """What the simulator does not model raises InvalidInputError naming the solver."""
    if sm.draft is not None:
        raise InvalidInputError("engine", "simulate", "'solver' for a speculative step model (the simulator "
                                "does not model speculative decoding)")
    if sm.ranks > 1 and filled(sched.dp_balance_steps):
        raise InvalidInputError("engine", "simulate", "'solver' for data-parallel attention with prompt balancing "
                                "(the simulator does not hold prompts), or Scheduler(dp_balance_steps=0)")
    if filled(sched.recv_interval_steps) > 1:
        raise InvalidInputError("engine", "simulate", "'solver' for a scheduler that takes in requests every "
                                "few steps (the simulator takes them every step), or Scheduler(recv_interval_steps=1)")
    if filled(sched.batch_wait_steps) and filled(sched.batch_wait_ratio):
        raise InvalidInputError("engine", "simulate", "'solver' for a scheduler that holds new prompts to batch "
                                "them (the simulator does not hold prompts), or Scheduler(batch_wait_steps=0)")


def _check_fits(sm: StepModel, sched: Scheduler, prompts: np.ndarray, outputs: np.ndarray) -> None:
    """The solver's refusals (serving.solver._running_cap): weights that leave no KV cache, or a
    request whose KV cache at its full length (prompt + output) does not fit alone. The engine
    could never admit it (preemption "none" reserves the full length: the run did not end) or ran
    it over the cache (the others)."""
    cap = kv_room(sm, sched)
    longest = int(np.argmax(prompts + outputs))
    need = float(effective_context(sm.held_groups, float(prompts[longest] + outputs[longest])))
    if need > cap:
        raise InvalidInputError("prompt_tokens", int(prompts[longest]),
                                f"a workload whose KV cache for one request fits: {cap:.3g} KV pairs free per chip "
                                f"{kv_room_knobs(sched)}, "
                                f"a request of {int(prompts[longest]):,} + {int(outputs[longest]):,} tokens needs "
                                f"{need:.3g}")


# the most engine steps one run simulates: a run of decode steps costs about 0.2 us and 16 bytes of
# trace a step (20,000,000: 4 s, 320 MB), a prefill step a pass of Python (about 25 us: 1,000,000
# take 25 s); 200 requests of 10**6 output tokens from 2 clients (10**8 steps) ran for minutes
MAX_SIMULATED_STEPS = 20_000_000
MAX_SIMULATED_PREFILL_STEPS = 1_000_000
# the most seconds of work one run may take (time.monotonic, read every pass of the scheduler loop:
# a pass costs 20-70 us of Python, machine to machine, so no count of passes is a time). A run of
# decode steps ends at the next event (a completion, an arrival, a full KV cache), a few passes a
# request; but while a prompt waits for KV room the scheduler looks again after every decode step,
# one pass each (4 clients of 131,072 + 100,000 tokens on an H100: 8 requests took 5.6 s, 40 took
# 32 s). Past the budget the run is refused by name (engine='solver'), not left to run; a run
# longer than 2 s shows its requests done on a progress bar (a terminal's stderr)
SIMULATE_BUDGET_S = 60.0


def _check_cost(sched: Scheduler, prompts: np.ndarray, outputs: np.ndarray, concurrency: int | None) -> None:
    """Refuse a run whose steps (at least: every output token in a batch as full as the clients
    and max_running allow; every prompt token in a full token budget) exceed the caps above."""
    n, batch = len(prompts), min(filled(sched.max_running), concurrency or filled(sched.max_running))
    decode = float(np.sum(np.maximum(outputs - 1, 0))) / batch
    prefill = float(np.sum(prompts)) / filled(sched.token_budget)
    for steps, cap, kind in ((decode, MAX_SIMULATED_STEPS, "decode"), (prefill, MAX_SIMULATED_PREFILL_STEPS, "prefill")):
        if steps > cap:
            raise InvalidInputError("n_requests", n, f"a run of at most {cap:,} {kind} steps with engine='simulate': "
                                    f"{n:,} requests of {float(np.mean(prompts)):,.0f} + {float(np.mean(outputs)):,.0f} "
                                    f"tokens on average take at least {steps:,.0f}; fewer requests, shorter ones, or "
                                    "engine='solver', whose cost does not grow with the load")


class _Simulation:
    """The state of one `simulate` run: requests by id (pending at the engine, waiting, being
    prefilled), the decoding batch as arrays (ids, contexts, tokens left), the clock."""

    def __init__(self, sm: StepModel, sched: Scheduler, prompts: np.ndarray, outputs: np.ndarray,
                 concurrency: int | None, arrivals: np.ndarray | None):
        n = len(prompts)
        self.sm, self.sched, self.n = sm, sched, n
        self.S, self.T = prompts.astype(np.int64), outputs.astype(np.int64)
        self.groups, self.held_groups = sm.groups, sm.held_groups     # attended, held
        self.P, self.M, self.blk = filled(sched.token_budget), filled(sched.max_running), filled(sched.kv_block_tokens)
        self.cap = sm.kv_pairs_capacity(sched)
        self.closed = arrivals is None
        arrive = np.full(n, np.inf)
        self.h = sm.host(self.S.astype(float))    # request i reaches the engine h[i] after it is sent
        if arrivals is not None:
            arrive[:] = np.asarray(arrivals, float)
            self.issued = n
        else:
            self.issued = min(filled(concurrency), n)
            arrive[:self.issued] = 0.0
        self.pending = [(arrive[i] + self.h[i], i) for i in range(self.issued)]      # (time at the engine, id)
        heapq.heapify(self.pending)
        self.tr = Trace(arrive, np.full(n, np.nan), np.full(n, np.nan), np.full(n, np.nan), [])
        self.waiting: deque[int] = deque()
        # a scheduler running `lookahead` steps ahead of the GPU (Served.lookahead_steps) had
        # launched the next step(s) when a request reached it mid-step: [steps to wait, id]
        self.look, self.last_start = sm.lookahead, -np.inf
        self.deferred: list[list[int]] = []
        self.pre_done = np.zeros(n, np.int64)          # prompt tokens prefilled
        self.need = self.S.copy()                      # tokens to prefill (a preempted request's context)
        self.saved_left = self.T - 1                   # tokens still to decode after the prefill
        self.run_id = np.zeros(0, np.int64)            # decoding sequences
        self.run_ctx = np.zeros(0, np.int64)
        self.run_left = np.zeros(0, np.int64)
        self.prefilling: list[int] = []                # admitted, prefill not finished (ids)
        self.t = 0.0
        self.completed = 0
        self.reserved = 0.0
        self.per_token = float(effective_context(self.held_groups, 1.0))     # most pairs one more token adds

    def kv_of(self, ctx):
        """Pairs a sequence of ctx tokens holds, block-rounded."""
        return effective_context(self.held_groups, np.ceil(np.asarray(ctx, float) / self.blk) * self.blk)

    def reserve(self, i: int) -> float:
        """Pairs held at admission under preemption="none"."""
        return float(effective_context(self.held_groups, float(self.S[i] + self.T[i])))

    def held(self) -> float:
        if self.sched.preemption == "none":
            return self.reserved
        r = float(np.sum(self.kv_of(self.run_ctx))) if self.run_ctx.size else 0.0
        if not self.prefilling:
            return r
        return r + float(np.sum(self.kv_of(self.pre_done[self.prefilling])))

    def run(self) -> Trace:
        budget = WorkBudget(SIMULATE_BUDGET_S, self._refusal, desc="simulate", total=self.n, unit=" requests")
        while self.completed < self.n:
            budget.tick(self.completed)
            while self.pending and self.pending[0][0] <= self.t:
                at, i = heapq.heappop(self.pending)
                if self.look and at > self.last_start:     # it arrived while a step ran
                    self.deferred.append([self.look, i])
                else:
                    self.waiting.append(i)
            if self.deferred and not self.prefilling and self.run_id.size == 0:
                self._release(self.look)        # nothing ran ahead of an idle engine
            if not self.waiting and not self.prefilling and self.run_id.size == 0:
                if not self.pending:
                    break
                self.t = self.last_start = float(self.pending[0][0])
                continue
            b = int(self.run_id.size)
            used = self._admit(b)
            chunks = self._chunks(b)
            if not chunks and b:
                k_done, c_done = float(self._decode_run(b, used)), 0.0
            else:
                k_done, c_done = 1.0, self._prefill_step(b, chunks, used)
            self._release(int(k_done))
            self._preempt(used, k_done, c_done)
            self._complete()
        budget.close()
        return self.tr

    def _refusal(self, elapsed_s: float) -> InvalidInputError:
        return InvalidInputError("engine", "simulate", f"a run of at most {SIMULATE_BUDGET_S:g} s of work "
                                 f"(SIMULATE_BUDGET_S): after {elapsed_s:.3g} s, {self.completed:,} of {self.n:,} "
                                 "requests were done (prompts that wait for KV room are admitted one decode step "
                                 "at a time when the KV cache is this close to full); engine='solver', fewer "
                                 "requests or clients, or shorter requests")

    def _release(self, steps: int) -> None:
        """Deferred requests wait `steps` fewer steps; those done waiting join the waiting queue."""
        for d in self.deferred:
            d[0] -= steps
        self.waiting.extend(i for left, i in self.deferred if left <= 0)
        self.deferred = [d for d in self.deferred if d[0] > 0]

    def _admit(self, b: int) -> float:
        """Waiting prompts join the prefilling ones while the batch and the KV cache have room;
        the KV pairs held after admission. Without reservation a prompt is admitted if its whole
        prompt fits beside what is held and what the prompts already admitted will hold once
        prefilled (`claimed`): two prompts never count the same free room."""
        used = self.held()
        claimed = used + self._unfilled()
        while self.waiting and len(self.prefilling) + b < self.M:
            i = self.waiting[0]
            if self.sched.preemption == "none":
                r = self.reserve(i)
                if used + r > self.cap:
                    break
                used += r
                self.reserved += r
            else:
                prompt = float(self.kv_of(self.need[i]))
                if claimed + prompt > self.cap and (b or self.prefilling):
                    break
                claimed += prompt
            self.waiting.popleft()
            self.prefilling.append(i)
            admit = self.tr.admit
            admit[i] = self.t if np.isnan(admit[i]) else admit[i]
        return used

    def _unfilled(self) -> float:
        """KV pairs the prefilling prompts will add before their prefill ends."""
        if self.sched.preemption == "none" or not self.prefilling:
            return 0.0
        ids = self.prefilling
        return float(np.sum(self.kv_of(self.need[ids])) - np.sum(self.kv_of(self.pre_done[ids])))

    def _chunks(self, b: int) -> list[tuple[int, int]]:
        """(id, tokens) of the prompts this step prefills, within the token budget."""
        chunks: list[tuple[int, int]] = []
        left = self.P - b if self.sched.mixed_steps else self.P
        if self.sched.mixed_steps or not self.run_id.size or self.prefilling:
            for i in self.prefilling:
                if left <= 0:
                    break
                rest = int(self.need[i] - self.pre_done[i])
                take = rest if not self.sched.chunked_prefill else min(rest, left)
                if take > left and chunks:
                    break
                chunks.append((i, take))
                left -= take
        return chunks

    def _u_run(self) -> float:
        return float(np.mean(effective_context(self.groups, self.run_ctx.astype(float))))

    def _h_run(self) -> float:
        """Held pairs per decoding sequence, for a sparse-attention indexer (0 without one)."""
        return float(np.mean(effective_context(self.held_groups, self.run_ctx.astype(float)))) if self.sm.indexed \
            else 0.0

    def _advance(self, b: int, span: float, used: float) -> None:
        self.tr.busy += b * span
        self.tr.kv += min(used / self.cap, 1.0) * span if self.cap > 0 else 0.0
        self.t += span

    def _decode_run(self, b: int, used: float) -> int:
        """A run of pure decode steps until the next event (a completion, the KV cache full, an
        arrival, a prompt that could be admitted); the steps taken."""
        k = int(self.run_left.min())
        if self.sched.preemption != "none":
            room = self.cap - used
            k = max(1, min(k, int(room // max(b * self.per_token, 1e-30)) + 1))
        if self.waiting and len(self.prefilling) + b < self.M or self.deferred:
            k = 1
        if k > 1:
            js = np.arange(k, dtype=float)
            ctx = self.run_ctx[None, :].astype(float) + js[:, None]
            u_j = np.mean(effective_context(self.groups, ctx), axis=1)
            h_j = np.mean(effective_context(self.held_groups, ctx), axis=1) if self.sm.indexed else 0.0
            dur = np.asarray(self.sm.step(float(b), u_j, h=h_j), float)
        else:
            dur = np.array([self.sm.scalar_step(float(b), self._u_run(), h=self._h_run())])
        if self.pending:
            k2 = int(np.searchsorted(np.cumsum(dur), self.pending[0][0] - self.t)) + 1
            if k2 < k:
                k, dur = k2, dur[:k2]
        self.tr.itl.append((dur, np.full(k, float(b))))
        self._advance(b, float(dur.sum()), used)
        self.last_start = self.t - float(dur[-1])
        self.run_ctx = self.run_ctx + k
        self.run_left = self.run_left - k
        return k

    def _prefill_step(self, b: int, chunks: list[tuple[int, int]], used: float) -> float:
        """One step of the prefill chunks, with the b decoding sequences where steps mix; the
        prompt tokens run. A prompt whose prefill ends joins the decoding batch."""
        g, held, done = self.groups, self.held_groups, self.pre_done
        bd = b if self.sched.mixed_steps else 0
        cu = sum(float(effective_context(held, float(done[i] + c))) for i, c in chunks)
        cp = sum(float(causal_pairs(g, float(done[i] + c)) - causal_pairs(g, float(done[i]))) for i, c in chunks)
        hp = sum(float(causal_pairs(held, float(done[i] + c)) - causal_pairs(held, float(done[i])))
                 for i, c in chunks) if self.sm.indexed else 0.0
        c_tok = float(sum(c for _, c in chunks))
        u_run, h_run = (self._u_run(), self._h_run()) if bd else (0.0, 0.0)
        dt = self.sm.scalar_step(float(bd), u_run, c_tok, cu, cp, seqs=float(bd + len(chunks)), h=h_run, hp=hp)
        self.last_start = self.t
        if bd:
            self.tr.itl.append((np.array([dt]), np.array([float(bd)])))
            self.run_ctx = self.run_ctx + 1
            self.run_left = self.run_left - 1
        self._advance(b, dt, used)
        for i, c in chunks:
            done[i] += c
            if done[i] >= self.need[i]:
                self.prefilling.remove(i)
                if np.isnan(self.tr.first[i]):
                    self.tr.first[i] = self.t
                self.run_id = np.append(self.run_id, i)
                self.run_ctx = np.append(self.run_ctx, self.need[i])
                self.run_left = np.append(self.run_left, self.saved_left[i])
        return c_tok

    def _preempt(self, used: float, k_done: float, c_done: float) -> None:
        """KV overflow: preempt the newest sequences (the tokens already streamed stay streamed)."""
        n_run = self.run_ctx.size
        grown = used + self.per_token * (float(n_run) * k_done + c_done + self.blk * (n_run + 1))
        if self.sched.preemption == "none" or not n_run or grown <= self.cap:
            return
        held = self.held()
        while self.run_ctx.size > 1 and held > self.cap:
            held -= float(self.kv_of(self.run_ctx[-1]))
            i = int(self.run_id[-1])
            self.tr.preemptions += 1
            self.need[i], self.saved_left[i] = self.run_ctx[-1], self.run_left[-1]
            self.pre_done[i] = 0 if self.sched.preemption == "recompute" else self.need[i]
            self.run_id, self.run_ctx, self.run_left = self.run_id[:-1], self.run_ctx[:-1], self.run_left[:-1]
            self.waiting.appendleft(i)

    def _complete(self) -> None:
        """Finished sequences leave the batch; in a closed loop each client sends its next request."""
        fin = self.run_left <= 0
        if not fin.any():
            return
        for i in self.run_id[fin]:
            self.tr.done[i] = self.t
            self.completed += 1
            if self.sched.preemption == "none":
                self.reserved -= self.reserve(int(i))
            if self.closed and self.issued < self.n:
                self.tr.arrive[self.issued] = self.t
                heapq.heappush(self.pending, (self.t + self.h[self.issued], self.issued))
                self.issued += 1
        self.run_id, self.run_ctx, self.run_left = self.run_id[~fin], self.run_ctx[~fin], self.run_left[~fin]


def simulate(sm: StepModel, sched: Scheduler, prompts: np.ndarray, outputs: np.ndarray, *,
             concurrency: int | None = None, arrivals: np.ndarray | None = None) -> Trace:
    """Iteration-level simulation. Closed loop (`concurrency` clients, each sends its next request
    when the last completes) or given arrival times. Lengths per request are given."""
    _check_simulable(sm, sched)
    _check_fits(sm, sched, prompts, outputs)
    _check_cost(sched, prompts, outputs, concurrency)
    return _Simulation(sm, sched, prompts, outputs, concurrency, arrivals).run()
