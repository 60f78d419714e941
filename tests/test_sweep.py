"""mb.sweep: the grid equals estimate() point by point, stays chunked, drops what does not fit,
and the core runs unchanged on dask arrays."""
import math
import operator
import os
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings, strategies as st

import membound as mb
from membound.errors import DoesNotFitError, InvalidInputError, UnknownNameError
from membound.planning.sweep import iter_sweep, pareto_front, sweep

SKIP = {"memory_placement",   # per-tier text; the table carries the numbers
        "assumptions"}        # a profile's unsourced figures (text): load_hardware(name).assumptions(n_chips)


def _row_dict(table, i):
    return {k: table[k][i] for k in table}


def _same(a, b):
    if b is None:
        return a is None or (isinstance(a, float) and math.isnan(a))
    if isinstance(b, float):
        return a == b or abs(a - b) <= 1e-12 * abs(b)
    return a == b


def _check_rows_equal_estimate(table, **fixed):
    n = len(table["batch"])
    assert n > 0
    for i in range(n):
        row = _row_dict(table, i)
        r = mb.estimate(row["model"], row["hardware"], batch=int(row["batch"]),
                        prompt_tokens=int(row["prompt_tokens"]), output_tokens=int(row["output_tokens"]),
                        weight_dtype=row["weight_dtype"], kv_dtype=row["kv_dtype"],
                        activation_dtype=row["activation_dtype"], n_chips=int(row["n_chips"]),
                        runtime=row["runtime"], **fixed).to_dict()
        for k, v in r.items():
            if k in SKIP:
                continue
            assert k in row, k
            assert _same(row[k], v), (k, row[k], v, row)


def test_grid_equals_estimate_point_by_point():
    # dense + sliding-window + MoE models, two devices, dtypes, chip counts and runtimes
    t = sweep(model=["llama-3.1-8b", "gemma-3-4b", "qwen3-30b-a3b"], hardware=["h100-sxm", "a100-80gb"],
              batch=[1, 7, 64], prompt_tokens=[0, 1000, 5000], output_tokens=[1, 300],
              weight_dtype=["bf16", "int4"], kv_dtype=["bf16", "fp8"], n_chips=[1, 2],
              runtime=[None, "vllm"], as_frame=False)
    assert len(t["batch"]) == 3 * 2 * 3 * 3 * 2 * 2 * 2 * 2 * 2 - t.attrs["dropped_unfit"]
    _check_rows_equal_estimate(t)


def test_speculative_group_equals_estimate():
    spec = mb.SpeculativeDecoding(draft="llama-3.2-1b", gamma=4, acceptance_rate=0.8)
    t = sweep(model="llama-3.1-8b", hardware="h100-sxm", batch=[1, 16], prompt_tokens=[128, 4096],
              output_tokens=[64, 512], speculative=spec, as_frame=False)
    _check_rows_equal_estimate(t, speculative=spec)
    assert set(t["spec_gamma"]) == {4.0}


def test_a_self_drafting_head_sweeps_with_no_draft_name():
    # draft=None is an EAGLE-style head on the target (no draft model to name): spec_draft is
    # missing, as estimate() gives None, and the tokens per round are 1 + a + a^2 = 1 + 0.7 + 0.49
    # = 2.19 at gamma 2
    spec = mb.SpeculativeDecoding(gamma=2, acceptance_rate=0.7)
    t = sweep(model="llama-3.1-8b", hardware="h100-sxm", batch=[1, 2], speculative=spec, as_frame=False)
    assert list(t["spec_draft"]) == [None, None]
    assert t["spec_tokens_per_round"] == pytest.approx([2.19, 2.19], rel=1e-12)
    _check_rows_equal_estimate(t, speculative=spec)


def test_hand_derived_bandwidth_bound_row():
    # ideal runtime, empty context, one token: the step streams every weight once.
    # llama-3.2-1b (tied embeddings, so no separate lookup table): 1,235,814,400 params x 2 bytes
    # (bf16) = 2.47 GB; H100 SXM 3.35e12 B/s -> 3.35e12 / 2.4716e9 = 1355.4 tok/s.
    # Compute: 2 x 1.236e9 FLOP / 989e12 FLOP/s = 2.5 us, far below the 0.74 ms of streaming.
    t = sweep(model="llama-3.2-1b", hardware="h100-sxm", prompt_tokens=0, output_tokens=1, runtime="ideal")
    weights = 1_235_814_400 * 2
    assert t["memory_weights_bytes"][0] == weights
    assert t["decode_tok_s_per_user"][0] == pytest.approx(3.35e12 / weights, rel=1e-12)
    assert t["bound"][0] == "memory"
    # cost: $3.00 per chip-hour (the profile's price) over 1355.4 tokens/s: 3 / 3600 / 1355.4 * 1e6 = $0.61 per M tokens
    assert t["cost_per_million_tokens_usd"][0] == pytest.approx(3.0 / 3600 / (3.35e12 / weights) * 1e6, rel=1e-9)


def test_unfit_points_dropped_and_counted():
    # llama-3.1-70b in bf16: 70.55e9 x 2 = 141 GB of weights > one H100's 85.5 GB
    t = sweep(model="llama-3.1-70b", hardware="h100-sxm", batch=[1, 2], prompt_tokens=[10, 20], n_chips=[1, 2])
    assert t.attrs["dropped_unfit"] == 4          # all four 1-chip points
    assert set(t["n_chips"]) == {2}
    kept = sweep(model="llama-3.1-70b", hardware="h100-sxm", batch=[1, 2], prompt_tokens=[10, 20], n_chips=1,
                 include_unfit=True)
    assert len(kept) == 4 and not kept["memory_fits"].any() and kept.attrs["dropped_unfit"] == 0
    with pytest.raises(DoesNotFitError):
        mb.estimate("llama-3.1-70b", "h100-sxm", batch=1, prompt_tokens=10, n_chips=1)


def test_chunks_are_bounded_and_reassemble():
    kw = dict(model="llama-3.1-8b", hardware="h100-sxm", batch=[1, 2, 3, 4, 5], prompt_tokens=[0, 64, 128],
              output_tokens=[1, 2, 3, 4])
    chunks = list(iter_sweep(**kw, chunk_size=7, as_frame=False))
    assert all(len(c["batch"]) <= 7 for c in chunks)
    assert sum(len(c["batch"]) for c in chunks) == 5 * 3 * 4
    whole = sweep(**kw, as_frame=False)
    small = sweep(**kw, chunk_size=7, as_frame=False)
    order_w = np.lexsort((whole["output_tokens"], whole["prompt_tokens"], whole["batch"]))
    order_s = np.lexsort((small["output_tokens"], small["prompt_tokens"], small["batch"]))
    for k in whole:
        assert np.array_equal(whole[k][order_w], small[k][order_s]), k
    rows = sweep(**kw, chunk_size=7, reduce=lambda acc, c: (acc or 0) + len(c["batch"]))
    assert rows == 60


def test_bad_values_raise_membound_errors():
    with pytest.raises(InvalidInputError) as e:
        sweep(model="llama-3.1-8b", hardware="h100-sxm", batch=[1, 0])
    assert e.value.field == "batch" and e.value.value == 0
    with pytest.raises(InvalidInputError):
        sweep(model="llama-3.1-8b", hardware="h100-sxm", prompt_tokens=[-1])
    with pytest.raises(InvalidInputError):
        sweep(model="llama-3.1-8b", hardware="h100-sxm", batch=[])
    with pytest.raises(UnknownNameError):
        sweep(model="no-such-model", hardware="h100-sxm")
    # a100 has no fp8 tensor cores: raise like estimate(), or skip and say why
    with pytest.raises(InvalidInputError):
        sweep(model="llama-3.1-8b", hardware=["h100-sxm", "a100-80gb"], activation_dtype="fp8")
    t = sweep(model="llama-3.1-8b", hardware=["h100-sxm", "a100-80gb"], activation_dtype="fp8", on_invalid="skip")
    assert set(t["hardware"]) == {"h100-sxm"}
    assert len(t.attrs["skipped"]) == 1 and "a100-80gb" in t.attrs["skipped"][0][0]


def test_dict_fallback_and_price_map():
    t = sweep(model="llama-3.1-8b", hardware=["h100-sxm", "h200"], price_usd_per_hour={"h200": 4.0},
              as_frame=False)
    assert isinstance(t, dict) and t.attrs["dropped_unfit"] == 0
    i = list(t["hardware"]).index("h200")
    r = mb.estimate("llama-3.1-8b", "h200", price_usd_per_hour=4.0)
    assert t["cost_per_million_tokens_usd"][i] == r.cost_per_million_tokens_usd


def test_pareto_front():
    # (1,3) (2,2) (3,1) are on the front; (2,1) is beaten by (2,2)
    assert list(pareto_front([1, 2, 3, 2], [3, 2, 1, 1])) == [0, 1, 2]


def test_core_runs_unchanged_on_dask():
    da = pytest.importorskip("dask.array")
    import dask
    prepare = sys.modules["membound.physics.estimate"].prepare
    p = prepare("mixtral-8x7b", "h100-sxm", n_chips=2, runtime="vllm")
    B = np.array([1.0, 4.0, 16.0, 64.0])[:, None, None]
    S = np.array([0.0, 512.0, 4096.0])[None, :, None]
    T = np.array([1.0, 128.0, 1000.0])[None, None, :]
    ref = p.evaluate(batch=B, prompt=S, output=T)
    lazy = p.evaluate(batch=da.from_array(B, chunks=(2, 1, 1)), prompt=da.from_array(S), output=da.from_array(T))
    assert isinstance(lazy["decode_tok_s_per_user"], da.Array)
    with dask.config.set(scheduler="synchronous"):
        for k in ("decode_tok_s_per_user", "ttft_s", "e2e_s", "kv_bytes_chip", "fits", "cost_per_million_tokens_usd"):
            got = lazy[k].compute() if hasattr(lazy[k], "compute") else lazy[k]
            np.testing.assert_array_equal(np.broadcast_to(got, np.shape(ref[k])), ref[k])


@settings(max_examples=25, deadline=None)
@given(model=st.sampled_from(["llama-3.1-8b", "gemma-3-4b", "mixtral-8x7b"]),
       hardware=st.sampled_from(["h100-sxm", "h200", "rtx-4090"]),
       batch=st.integers(1, 256), prompt=st.integers(0, 20000), output=st.integers(1, 4000),
       wd=st.sampled_from(["bf16", "fp8", "int4", "q4_0"]))
def test_property_sweep_equals_estimate(model, hardware, batch, prompt, output, wd):
    t = sweep(model=model, hardware=hardware, batch=batch, prompt_tokens=prompt, output_tokens=output,
              weight_dtype=wd, include_unfit=True, as_frame=False)
    row = _row_dict(t, 0)
    r = mb.estimate(model, hardware, batch=batch, prompt_tokens=prompt, output_tokens=output, weight_dtype=wd,
                    check_memory=False).to_dict()
    for k, v in r.items():
        if k not in SKIP:
            assert _same(row[k], v), (k, row[k], v)


def test_multi_tier_device_rows_equal_estimate():
    # SambaNova SN40L: SRAM, HBM and DDR tiers (the general placement, not the one-tier short-cut);
    # 70B int8 on 8 sockets spills weights and KV across tiers as batch and context grow
    t = sweep(model="llama-3.1-70b", hardware="sambanova-sn40l", n_chips=8, batch=[1, 16, 256],
              prompt_tokens=[0, 4096], output_tokens=[1, 512], weight_dtype="int8", include_unfit=True,
              as_frame=False)
    assert len(t["batch"]) == 3 * 2 * 2
    _check_rows_equal_estimate(t, check_memory=False)


def test_streamed_chunks_released_and_kept_agree():
    # chunks dropped by the consumer are recycled, chunks kept are never overwritten: both
    # streams reassemble the whole table (4 batches x 3 prompts x 5 outputs x 2 devices = 120 rows;
    # rows come block by block, and blocks follow the chunk size, so compare in grid order)
    kw = dict(model="llama-3.1-8b", hardware=["h100-sxm", "h200"], batch=[1, 2, 3, 4],
              prompt_tokens=[0, 64, 128], output_tokens=[1, 2, 3, 4, 5], chunk_size=16)
    whole = sweep(**{k: v for k, v in kw.items() if k != "chunk_size"})
    copies = sweep(**kw, reduce=lambda acc, c: (acc or []) + [c.copy()])
    kept = list(iter_sweep(**kw))
    for chunks in (copies, kept):
        assert all(len(c) <= 16 for c in chunks) and sum(map(len, chunks)) == 120
        key = ["hardware", "batch", "prompt_tokens", "output_tokens"]
        again = pd.concat(chunks).sort_values(key, ignore_index=True)
        pd.testing.assert_frame_equal(again, whole.sort_values(key, ignore_index=True))


def test_label_columns_are_categorical_with_shared_categories():
    t = sweep(model="llama-3.1-8b", hardware=["h100-sxm", "h200"], batch=[1, 8], weight_dtype=["bf16", "fp8"])
    assert list(t["hardware"].cat.categories) == ["h100-sxm", "h200"]
    assert list(t["bound"].cat.categories) == ["memory", "compute", "latency", "communication", "overhead", "draft"]
    chunks = list(iter_sweep(model="llama-3.1-8b", hardware=["h100-sxm", "h200"], batch=[1, 8], chunk_size=1))
    assert all(list(c["hardware"].cat.categories) == ["h100-sxm", "h200"] for c in chunks)


def test_dask_engine_equals_numpy_engine_row_for_row():
    pytest.importorskip("dask.dataframe")
    import dask
    kw = dict(model=["llama-3.1-8b", "llama-3.1-70b"], hardware="h100-sxm", batch=[1, 8, 64],
              prompt_tokens=list(range(0, 4000, 100)), output_tokens=list(range(1, 2000, 50)))
    for include_unfit in (True, False):     # 70B bf16 does not fit one H100: its partitions come back empty
        lazy = sweep(**kw, include_unfit=include_unfit, engine="dask", chunk_size=1000)
        assert lazy.npartitions > 2
        # the partitions themselves, with no per-partition string-conversion task after them (the
        # labels are categoricals): such a task moved whole partitions between workers
        assert [type(e).__name__ for e in lazy.expr.walk()] == ["FromMapProjectable"]
        with dask.config.set(scheduler="synchronous"):
            got = lazy.compute()
        key = ["model", "batch", "prompt_tokens", "output_tokens"]     # blocks follow the partition size
        pd.testing.assert_frame_equal(got.sort_values(key, ignore_index=True),
                                      sweep(**kw, include_unfit=include_unfit).sort_values(key, ignore_index=True))
    with pytest.raises(InvalidInputError):
        sweep(model="llama-3.1-8b", hardware="h100-sxm", batch=[0], engine="dask")
    with pytest.raises(InvalidInputError):
        sweep(model="llama-3.1-8b", hardware="h100-sxm", engine="spark")
    with pytest.raises(InvalidInputError):
        sweep(model="llama-3.1-8b", hardware="h100-sxm", engine="dask", reduce="sum")


def test_dask_engine_on_a_local_cluster_of_two_worker_processes():
    # 2 models x 50 batches x 100 prompts x 1,000 outputs = 10,000,000 configurations, evaluated by
    # two worker processes: rows per model over the whole grid (dask asks the partitions for
    # the one column it needs), and 10 random rows of each of 3 random partitions, which must
    # equal estimate()
    distributed = pytest.importorskip("distributed")
    import dask
    import functools
    import logging
    src = os.path.dirname(os.path.dirname(mb.__file__))
    lazy = sweep(model=["llama-3.1-8b", "qwen3-30b-a3b"], hardware="h100-sxm", batch=list(range(1, 51)),
                 prompt_tokens=list(range(0, 10000, 100)), output_tokens=list(range(1, 1001)),
                 include_unfit=True, engine="dask")
    rng = np.random.default_rng(17)
    picked = [int(i) for i in rng.choice(lazy.npartitions, 3, replace=False)]
    samples = [lazy.partitions[i].map_partitions(functools.partial(pd.DataFrame.sample, n=10, random_state=i),
                                                 meta=lazy._meta)
               for i in picked]
    # and a tenth of the grid (batches 1-5) folded on the workers, the folds merged there: the row count
    folds = sweep(model=["llama-3.1-8b", "qwen3-30b-a3b"], hardware="h100-sxm", batch=list(range(1, 6)),
                  prompt_tokens=list(range(0, 10000, 100)), output_tokens=list(range(1, 1001)),
                  include_unfit=True, engine="dask", chunk_size=250_000, reduce=lambda acc, c: (acc or 0) + len(c))
    merged = sweep(model=["llama-3.1-8b", "qwen3-30b-a3b"], hardware="h100-sxm", batch=list(range(1, 6)),
                   prompt_tokens=list(range(0, 10000, 100)), output_tokens=list(range(1, 1001)),
                   include_unfit=True, engine="dask", chunk_size=250_000, reduce=lambda acc, c: (acc or 0) + len(c),
                   merge=operator.add)      # the same folds merged in sweep's own tree on the workers
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                  silence_logs=logging.ERROR, env={"PYTHONPATH": src}) as cluster, \
            distributed.Client(cluster):
        counts, *rows = dask.compute(lazy["model"].value_counts(), *samples)
        total = folds.fold(operator.add).compute()      # a bag: not in one compute with frames (dask warns)
        merged_total = merged.compute()
    assert counts.to_dict() == {"llama-3.1-8b": 5_000_000, "qwen3-30b-a3b": 5_000_000}
    assert (folds.npartitions, total, merged_total) == (4, 1_000_000, 1_000_000)
    for part in rows:       # include_unfit: a sampled row may not fit (qwen3 at large batches)
        assert len(part) == 10
        _check_rows_equal_estimate(part.reset_index(drop=True), check_memory=False)


def test_columns_selects_what_is_written():
    full = sweep(model="llama-3.1-8b", hardware="h100-sxm", batch=[1, 64], prompt_tokens=[0, 4096])
    some = sweep(model="llama-3.1-8b", hardware="h100-sxm", batch=[1, 64], prompt_tokens=[0, 4096],
                 columns=["batch", "bound", "decode_tok_s_total"])
    assert list(some.columns) == ["batch", "decode_tok_s_total", "bound"]      # table order
    pd.testing.assert_frame_equal(some, full[list(some.columns)])
    with pytest.raises(InvalidInputError) as e:
        sweep(model="llama-3.1-8b", hardware="h100-sxm", columns=["tok_s"])
    assert e.value.field == "columns" and e.value.value == "tok_s"


def test_served_sweep_rows_equal_serve():
    # concurrency= replaces static batches by served steady states: 2 devices x 3 client counts x
    # 2 prompts x 2 outputs = 24 rows, each equal to mb.serve() at that point
    t = sweep(model="llama-3.1-8b", hardware=["h100-sxm", "h200"], concurrency=[1, 8, 64],
              prompt_tokens=[1024, 4096], output_tokens=[256, 1024], runtime="vllm")
    assert len(t) == 2 * 3 * 2 * 2
    for i in (0, 7, 13, 23):
        row = t.iloc[i]
        r = mb.serve("llama-3.1-8b", row["hardware"], concurrency=int(row["concurrency"]), runtime="vllm",
                     prompt_tokens=int(row["prompt_tokens"]), output_tokens=int(row["output_tokens"]))
        assert (row["weight_dtype"], row["kv_dtype"]) == (r.weight_dtype, r.kv_dtype)
        for col, want in (("ttft_s", r.ttft.mean), ("tpot_s", r.tpot.mean), ("tok_s_per_user", r.tok_s_per_user),
                          ("output_tok_s_per_chip", r.output_tok_s_per_chip), ("mean_running", r.mean_running),
                          ("cost_per_million_output_tokens_usd", r.cost_per_million_output_tokens_usd)):
            assert row[col] == pytest.approx(want, rel=1e-9), col
    with pytest.raises(InvalidInputError):
        sweep(model="llama-3.1-8b", hardware="h100-sxm", concurrency=[8], batch=[1, 8])


# ---- many small groups share one evaluation (issue 33 item 3) --------------------------------------
BUNDLED = [   # neighbours that differ only in their formats' numbers; a grid of 4 x 4 x 3 = 48 points
    dict(model=["llama-3.1-8b", "qwen3-30b-a3b"], hardware=["h100-sxm", "mi300x"],      # dense and MoE
         weight_dtype=["bf16", "fp8", "int8", "int4"], kv_dtype=["bf16", "fp8"]),
    dict(model="llama-3.1-70b", hardware="sambanova-sn40l", n_chips=8, weight_dtype=["int8", "bf16"]),   # 3 tiers
    dict(model="llama-3.1-70b", hardware="h100-sxm", n_chips=8, weight_dtype=["fp8", "bf16"], runtime="vllm",
         price_usd_per_hour={"h100-sxm": 3.0}),                            # 8-way tensor parallel, priced
    dict(model="gemma-3-4b", hardware="rtx-4090", runtime="llama.cpp",      # mat-vec rates and GEMM tiles
         weight_dtype=["q4_0", "q4_k_m", "q8_0", "q6_k", "q5_k_m"]),
    dict(model="gemma-3-4b", hardware="rtx-4090", runtime="llama.cpp", weight_dtype="q4_0",
         kv_dtype=["f16", "q8_0", "q4_0"]),
]
GRID = dict(batch=[1, 7, 64, 256], prompt_tokens=[0, 1, 1000, 5000], output_tokens=[1, 2, 300], on_invalid="skip")


def _bits(table) -> dict:
    """Every column's exact content: floats as their bits, labels as text."""
    return {k: np.asarray(v).view(np.int64) if np.asarray(v).dtype == np.float64 else np.asarray(v)
            for k, v in table.items()}


def _assert_same_bits(a, b):
    a, b = _bits(a), _bits(b)
    assert a.keys() == b.keys()
    for k in a:
        assert np.array_equal(a[k], b[k]), k


@pytest.mark.parametrize("kw", BUNDLED)
@pytest.mark.parametrize("include_unfit", [True, False])
def test_bundled_groups_equal_group_by_group_bit_for_bit(kw, include_unfit, monkeypatch):
    # Law: evaluating neighbouring groups together (their formats' numbers as arrays along a
    # leading axis) gives the table, the chunks and the dropped count of one evaluation per group,
    # bit for bit and in the same order. The grid is one block, so groups bundle; chunks of 100 rows
    # end inside bundles (48 rows a group).
    module = sys.modules["membound.planning.sweep"]
    kw = dict(kw, **GRID, include_unfit=include_unfit)
    bundled = []
    real = module._Bundle.evaluate

    def counted(self, *a):
        bundled.append(len(self.groups))
        return real(self, *a)
    monkeypatch.setattr(module._Bundle, "evaluate", counted)
    table = sweep(**kw, as_frame=False)
    chunks = list(iter_sweep(**kw, chunk_size=100, as_frame=False))
    assert bundled and max(bundled) >= 2        # the law is about bundles: some were made
    monkeypatch.setattr(module, "_key", lambda g: object())     # every group alone
    alone = sweep(**kw, as_frame=False)
    alone_chunks = list(iter_sweep(**kw, chunk_size=100, as_frame=False))
    _assert_same_bits(table, alone)
    assert table.attrs["dropped_unfit"] == alone.attrs["dropped_unfit"]
    assert [len(c["batch"]) for c in chunks] == [len(c["batch"]) for c in alone_chunks]
    for c, d in zip(chunks, alone_chunks):
        _assert_same_bits(c, d)
    assert all(len(c["batch"]) <= 100 for c in chunks)


@pytest.mark.parametrize("kw", BUNDLED[:3])
def test_kept_bundle_keys_and_stacks_give_the_bits_of_fresh_ones(kw, monkeypatch):
    # Law: a configuration's bundle key and its bundle's stacks are kept between sweeps (by its
    # ChipBase: `_of_configurations`); a sweep that finds them, kept by a sweep whose first workload
    # (batch, prompt, output: the one its groups are prepared at) differed, gives the bits of a sweep
    # that makes them afresh, and stacks nothing anew.
    module = sys.modules["membound.planning.sweep"]
    sweep(**kw, **GRID, as_frame=False)                                   # first workload (1, 0, 1)
    other = dict(kw, **GRID, include_unfit=True)
    other.update(batch=[64, 7, 256], prompt_tokens=[5000, 0], output_tokens=[300, 2])   # first (64, 5000, 300)
    stacked = []
    real = module.stack
    monkeypatch.setattr(module, "stack", lambda *a: stacked.append(1) or real(*a))
    kept = sweep(**other, as_frame=False)
    assert not stacked
    monkeypatch.setattr(module, "_KEYS", {})
    monkeypatch.setattr(module, "_STACKS", {})
    fresh = sweep(**other, as_frame=False)
    assert stacked                                                          # made afresh
    _assert_same_bits(kept, fresh)


def test_bound_code_is_the_first_largest_term():
    # Law (core.bound_name): the bound is the largest of memory, compute, latency, communication,
    # overhead and draft, the first on ties; the sweep finds it from the first two (per row) and the
    # others (here one per row, or one number) apart. Terms of 4 rows, by hand:
    # row 0: memory 1, compute 2, latency 2 (ties compute, later): compute (1)
    # row 1: memory 3, compute 3, overhead 3: memory (0)
    # row 2: memory 1, compute 1, communication 2: communication (3)
    # row 3: memory 0, compute 4, draft 5: draft (5)
    from membound.physics.core import BOUNDS
    from membound.planning.sweep import _Columns, _columns, _Schema
    r = {"memory_s": np.array([1.0, 3.0, 1.0, 0.0]), "compute_s": np.array([2.0, 3.0, 1.0, 4.0]),
         "latency_s": np.array([2.0, 0.0, 0.5, 0.0]), "communication_s": np.array([0.0, 1.0, 2.0, 0.0]),
         "overhead_s": np.array([0.0, 3.0, 0.0, 0.0]), "draft_s": np.array([0.0, 0.0, 0.0, 5.0])}
    cols = _Columns(_Schema(_columns(False), {"bound": BOUNDS}, True).select(["bound"]), 4)
    code = np.empty(4, np.int8)
    assert cols._bound(r, (4,), 4, code).tolist() == [1, 0, 3, 5]
    r.update(latency_s=0.5, communication_s=0.25, overhead_s=0.0, draft_s=0.0)    # one number each
    assert cols._bound(r, (4,), 4, code).tolist() == [1, 0, 0, 1]


def test_streamed_sweep_equals_one_shot():
    # Law: the chunks of iter_sweep put together are sweep()'s table, bit for bit, and a reduce
    # over them sees every row; here with bundled groups (48 rows each) and chunk ends inside
    # bundles (100, 1000 rows); chunks of 7 rows cut each group into blocks, which come in
    # grid order within a block: compare those sorted by the grid's keys
    kw = dict(BUNDLED[0], **GRID)
    whole = sweep(**kw, as_frame=False)
    keys = ("output_tokens", "prompt_tokens", "batch", "kv_dtype", "weight_dtype", "hardware", "model")
    for size in (7, 100, 1000):
        chunks = list(iter_sweep(**kw, chunk_size=size, as_frame=False))
        assert all(0 < len(c["batch"]) <= size for c in chunks)
        joined = {k: np.concatenate([c[k] for c in chunks]) for k in whole}
        if size < 48:
            joined = {k: v[np.lexsort([joined[c] for c in keys])] for k, v in joined.items()}
            want = {k: v[np.lexsort([whole[c] for c in keys])] for k, v in whole.items()}
        else:
            want = whole
        _assert_same_bits(joined, want)
        assert sweep(**kw, chunk_size=size, reduce=lambda acc, c: (acc or 0) + len(c["batch"])) == len(whole["batch"])


def test_dask_partitions_reuse_a_buffer_only_once_let_go(monkeypatch):
    # A process keeps a partition's column buffer for the next partition, and writes it again
    # only when nobody holds the last table any more: kept tables stay as they were, tables let
    # go hand their buffer on (3 batches x 40 prompts x 40 outputs in partitions of 1,000 rows)
    pytest.importorskip("dask.dataframe")
    import dask
    module = sys.modules["membound.planning.sweep"]
    made = []
    real = module._Columns.__init__

    def counted(self, *a):
        made.append(a[1])
        real(self, *a)
    monkeypatch.setattr(module._Columns, "__init__", counted)
    monkeypatch.setattr(module, "_SPARE", [])
    kw = dict(model="llama-3.1-8b", hardware="h100-sxm", batch=[1, 8, 64], prompt_tokens=list(range(0, 4000, 100)),
              output_tokens=list(range(1, 2000, 50)), include_unfit=True)
    lazy = sweep(**kw, engine="dask", chunk_size=1000)
    n = lazy.npartitions
    assert n >= 6
    with dask.config.set(scheduler="synchronous"):
        kept = [lazy.partitions[i].compute() for i in range(3)]
        copies = [k.copy(deep=True) for k in kept]
        made.clear()
        lengths = [len(lazy.partitions[i].compute()) for i in range(3, n)]     # each let go at once
    assert len([m for m in made if m > 0]) <= 2 < n - 3     # one or two buffers for all the rest
    for k, c in zip(kept, copies):
        pd.testing.assert_frame_equal(k, c)
    whole = sweep(**kw)
    assert sum(map(len, kept)) + sum(lengths) == len(whole)
    pd.testing.assert_frame_equal(pd.concat(copies, ignore_index=True), whole.iloc[:sum(map(len, kept))])


def test_a_dask_partition_of_many_blocks_is_the_local_sweep_and_takes_the_default_size(monkeypatch):
    # A partition is evaluated block by block (at most BLOCK points each, as sweep() and the
    # streamed chunks are) into one table, and chunk_size=None means DASK_PARTITION rows. With
    # BLOCK = 16 and partitions of 50 rows, a group of 4 batches x 5 prompts x 6 outputs = 120 points
    # is cut along the batch (1 x 5 x 6 = 30 > 16), then its prompts in 3 pieces of 2, 2, 1
    # (1 x 2 x 6 = 12 <= 16): blocks of 12, 12, 6 points per batch. A partition takes blocks while it
    # stays within 50 rows: 12+12+6+12 = 42, then 12+6+12+12+6 = 48, then 12+12+6 = 30; two models:
    # 6 partitions. Their rows are sweep()'s, in its order.
    pytest.importorskip("dask.dataframe")
    import dask
    module = sys.modules["membound.planning.sweep"]
    monkeypatch.setattr(module, "BLOCK", 16)
    monkeypatch.setattr(module, "DASK_PARTITION", 50)
    kw = dict(model=["llama-3.1-8b", "qwen3-30b-a3b"], hardware="h100-sxm", batch=[1, 2, 8, 64],
              prompt_tokens=[0, 10, 100, 1000, 5000], output_tokens=[1, 2, 30, 300, 1000, 3000], include_unfit=True)
    lazy = sweep(**kw, engine="dask")
    with dask.config.set(scheduler="synchronous"):
        parts = [lazy.partitions[i].compute() for i in range(lazy.npartitions)]
    assert [len(p) for p in parts] == [42, 48, 30] * 2
    pd.testing.assert_frame_equal(pd.concat(parts, ignore_index=True), sweep(**kw))


def _small_dask_partitions(monkeypatch) -> dict:
    # the fold tests' grid (240 rows) on small blocks, partitions and chunks: BLOCK = 16,
    # DASK_PARTITION = 50, DEFAULT_CHUNK = 25 (their comments derive the sizes from these)
    module = sys.modules["membound.planning.sweep"]
    monkeypatch.setattr(module, "BLOCK", 16)
    monkeypatch.setattr(module, "DASK_PARTITION", 50)
    monkeypatch.setattr(module, "DEFAULT_CHUNK", 25)
    return dict(model=["llama-3.1-8b", "qwen3-30b-a3b"], hardware="h100-sxm", batch=[1, 2, 8, 64],
                prompt_tokens=[0, 10, 100, 1000, 5000], output_tokens=[1, 2, 30, 300, 1000, 3000],
                include_unfit=True)


def test_dask_engine_folds_each_partition_where_it_is_evaluated(monkeypatch):
    # sweep(engine="dask", reduce=fold): one task a partition, which evaluates it in chunks and
    # folds them as the numpy engine folds its stream (accumulator from None), into a bag of one
    # accumulator per partition. The partitions of the test above (BLOCK = 16, 50 rows: blocks of
    # 12, 12, 6 points per batch; partitions 12+12+6+12, 12+6+12+12+6, 12+12+6) in chunks of at
    # most DEFAULT_CHUNK = 25 rows, a chunk ending before the block that would take it past 25:
    # 12+12 = 24 (+6 = 30), 6+12 = 18; 12+6 = 18 (+12), 12+12 = 24 (+6), 6; 12+12 = 24, 6.
    pytest.importorskip("dask.bag")
    import dask
    kw = _small_dask_partitions(monkeypatch)
    folds = sweep(**kw, engine="dask", reduce=lambda acc, chunk: [*(acc or []), chunk.copy()])
    assert folds.npartitions == 6 and len(dict(folds.__dask_graph__())) == 6
    with dask.config.set(scheduler="synchronous"):
        accs = folds.compute()
    assert [[len(c) for c in acc] for acc in accs] == [[24, 18], [18, 24, 6], [24, 6]] * 2
    pd.testing.assert_frame_equal(pd.concat([c for acc in accs for c in acc], ignore_index=True), sweep(**kw))
    # rows that do not fit are dropped before the fold sees a chunk: 70B bf16 never fits one H100,
    # so its partitions hand the fold nothing and keep the starting None
    kw = dict(model=["llama-3.1-8b", "llama-3.1-70b"], hardware="h100-sxm", batch=[1, 8, 64],
              prompt_tokens=list(range(0, 4000, 100)), output_tokens=list(range(1, 2000, 50)))
    with dask.config.set(scheduler="synchronous"):
        counts = sweep(**kw, engine="dask", chunk_size=1000, reduce=lambda acc, c: (acc or 0) + len(c)).compute()
    assert counts[-1] is None and sum(c or 0 for c in counts) == len(sweep(**kw))


def test_dask_engine_merges_the_folds_in_a_tree_in_partition_order(monkeypatch):
    # sweep(engine="dask", reduce=fold, merge=merge): the partitions of the test above folded as
    # there (one task each), their accumulators merged SPLIT_EVERY at a time on the workers, in
    # partition order, and one last task: what the bag's .fold(merge) gives, in fewer tasks.
    # 6 partitions, SPLIT_EVERY = 4: merges of partitions 0-3 and 4-5, then of those two, then
    # the last task: 6 + 2 + 1 + 1 = 10 tasks (the bag's fold: 6 folds, then dask's own tasks).
    pytest.importorskip("dask.bag")
    import dask
    kw = _small_dask_partitions(monkeypatch)
    module = sys.modules["membound.planning.sweep"]
    monkeypatch.setattr(module, "SPLIT_EVERY", 4)

    def fold(acc, chunk):
        return [*(acc or []), chunk.copy()]

    def merge(a, b):
        return [*(a or []), *(b or [])]

    merged = sweep(**kw, engine="dask", reduce=fold, merge=merge)
    assert len(dict(merged.__dask_graph__())) == 10
    with dask.config.set(scheduler="synchronous"):
        chunks = merged.compute()
        bag = sweep(**kw, engine="dask", reduce=fold).fold(merge).compute()
    assert [len(c) for c in chunks] == [24, 18, 18, 24, 6, 24, 6] * 2     # the test above's chunks, in order
    assert [len(c) for c in bag] == [len(c) for c in chunks]
    pd.testing.assert_frame_equal(pd.concat(chunks, ignore_index=True), sweep(**kw))
    # the numpy engine folds its one stream (merge unused): the same rows
    local = sweep(**kw, reduce=fold, merge=merge)
    pd.testing.assert_frame_equal(pd.concat(local, ignore_index=True), sweep(**kw))
    # partitions whose fold kept None are merged as the bag merges them (70B bf16 never fits one H100)
    kw = dict(model=["llama-3.1-8b", "llama-3.1-70b"], hardware="h100-sxm", batch=[1, 8, 64],
              prompt_tokens=list(range(0, 4000, 100)), output_tokens=list(range(1, 2000, 50)))
    with dask.config.set(scheduler="synchronous"):
        n = sweep(**kw, engine="dask", chunk_size=1000, reduce=lambda acc, c: (acc or 0) + len(c),
                  merge=lambda a, b: (a or 0) + (b or 0)).compute()
    assert n == len(sweep(**kw))
    assert module._merged(operator.add, []) is None      # no partition: the fold's start


def test_merge_needs_a_fold_to_merge():
    from membound.planning.reductions import Count
    kw = dict(model="llama-3.1-8b", hardware="h100-sxm", batch=[1, 2], prompt_tokens=[10], output_tokens=[5])
    with pytest.raises(InvalidInputError, match="merge"):
        sweep(**kw, reduce=lambda acc, c: c, merge="add")
    with pytest.raises(InvalidInputError, match="merge"):
        sweep(**kw, merge=operator.add)
    with pytest.raises(InvalidInputError, match="merge"):
        sweep(**kw, reduce=Count(), merge=operator.add)
    pytest.importorskip("dask.bag")
    with pytest.raises(InvalidInputError, match="merge"):
        sweep(**kw, engine="dask", merge=operator.add)


def _bench_dask():
    """benchmarks/bench_dask.py as a module (its top level imports the standard library and numpy only)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("bench_dask", Path(__file__).parents[1] / "benchmarks" / "bench_dask.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_front_folded_on_the_dask_engine_is_the_front_of_the_local_table(monkeypatch):
    # benchmarks/bench_dask.py --pareto's reduction on the fold path: each partition folded to its
    # own front chunk by chunk where it is evaluated (sweep(engine="dask", reduce=...)), the
    # partitions' fronts merged (Bag.fold). A point on the whole table's front is on the front of
    # any subset holding it, and a point dominated in a subset is dominated in the whole, so the
    # merged front is the whole table's: the same rows as pareto_front of sweep()'s table. Small
    # partitions (2,000 rows) and chunks (500 rows) so fronts are merged many times: 2 models x
    # 2 devices x 9 batches x 16 prompts x 20 outputs = 11,520 rows, 2,880 a group, 2 partitions
    # a group (of whole 16 x 20 = 320-point blocks: 6 and 3 blocks), 8 partitions.
    pytest.importorskip("dask.bag")
    import dask
    module = sys.modules["membound.planning.sweep"]
    monkeypatch.setattr(module, "BLOCK", 320)
    monkeypatch.setattr(module, "DEFAULT_CHUNK", 500)
    kw = dict(model=["llama-3.1-8b", "llama-3.1-70b"], hardware=["h100-sxm", "h200"],
              batch=[1, 2, 4, 8, 16, 32, 64, 128, 256], prompt_tokens=list(range(0, 8000, 500)),
              output_tokens=list(range(1, 4000, 200)), include_unfit=True)
    bench = _bench_dask()   # the fold and merge bench_dask --pareto runs
    folds = sweep(**kw, engine="dask", chunk_size=2000, reduce=bench.front_fold)
    assert folds.npartitions == 8
    with dask.config.set(scheduler="synchronous"):
        front = folds.fold(bench.merge_fronts).compute()
    table = sweep(**kw)
    assert len(table) == 11_520 and 0 < table.memory_fits.sum() < len(table)   # 70B bf16 does not fit one H100
    expected = table[table.memory_fits]
    expected = expected.iloc[pareto_front(expected.decode_tok_s_per_user.to_numpy(), expected.decode_tok_s_total.to_numpy())]
    assert len(expected) > 3
    pd.testing.assert_frame_equal(front.reset_index(drop=True), expected.reset_index(drop=True))


def test_a_dask_partition_is_three_integers_in_the_graph():
    # The graph holds the plan once and each partition as (group, first block, end block), so a
    # grid cut into ten times as many partitions pickles to little more: 2 models x 10 batches x
    # 40 prompts x 200 outputs = 160,000 points in partitions of 8,000 rows (20) or 800 (200).
    # A 3-tuple of small ints pickles to 11 bytes (PROTO, 3 x BININT1 2 bytes, TUPLE3, MEMOIZE,
    # and with framing a few more); 180 more partitions at even 100 bytes each is 18 kB. Partitions
    # that carried their blocks' axes would each add a block's output axis: 200 floats = 1,600 bytes.
    pytest.importorskip("dask.dataframe")
    import pickle
    kw = dict(model=["llama-3.1-8b", "qwen3-30b-a3b"], hardware="h100-sxm", batch=list(range(1, 11)),
              prompt_tokens=list(range(0, 4000, 100)), output_tokens=list(range(1, 201)), include_unfit=True)
    few, many = (sweep(**kw, engine="dask", chunk_size=n) for n in (8000, 800))
    assert (few.npartitions, many.npartitions) == (20, 200)
    assert len(pickle.dumps(many.expr)) - len(pickle.dumps(few.expr)) < 180 * 100


def test_a_process_computing_a_dask_partition_stops_numpy_advising_huge_pages(monkeypatch):
    # A process that evaluates a partition (a dask worker; here this one, synchronous scheduler)
    # keeps the memory of the frames made from it: numpy stops advising huge pages for large
    # arrays (sweep._settle_worker). Outputs do not depend on it: the partition is sweep()'s rows.
    pytest.importorskip("dask.dataframe")
    import dask
    import numpy as np
    module = sys.modules["membound.planning.sweep"]
    multiarray = (getattr(np, "_core", None) or np.core).multiarray      # numpy 2 / numpy 1
    before = multiarray._set_madvise_hugepage(True)
    try:
        module._settle_worker.cache_clear()
        kw = dict(model="llama-3.1-8b", hardware="h100-sxm", batch=[1, 2], prompt_tokens=[0, 100],
                  output_tokens=[1, 30], include_unfit=True)
        assert multiarray._get_madvise_hugepage() is True
        with dask.config.set(scheduler="synchronous"):
            part = sweep(**kw, engine="dask").compute()
        assert multiarray._get_madvise_hugepage() is False
        pd.testing.assert_frame_equal(part, sweep(**kw))
    finally:
        multiarray._set_madvise_hugepage(before)
