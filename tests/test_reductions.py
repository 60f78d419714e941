"""membound.planning.reductions: a sweep's query reduced on arrays gives what the pandas query on the
whole table gives, on the local engine and on dask (partitions merged in a tree), and checks its
input before anything is evaluated."""
import operator
import sys

import numpy as np
import pandas as pd
import pytest

from membound.errors import InvalidInputError
from membound.planning.reductions import Count, Front, Histogram, Top, best, pareto_front
from membound.planning.sweep import sweep

KW = dict(model=["llama-3.1-8b", "qwen3-30b-a3b", "llama-3.1-70b"], hardware=["h100-sxm", "a100-80gb"],
          batch=[1, 2, 4, 8, 16, 64], prompt_tokens=list(range(0, 8000, 500)), output_tokens=[1, 2, 64, 256, 1000, 3000],
          include_unfit=True)     # 3 x 2 x 6 x 16 x 6 = 3,456 rows; 70B bf16 fits neither device
KEEP = [("ttft_s", "<=", 2.0), ("decode_tok_s_per_user", ">=", 30.0)]
QUERY = (Count(), Top(10, "decode_tok_s_total", where=KEEP), Front(where=[("memory_fits", "==", True)]),
         Histogram("ttft_s", [0, 0.1, 1, 10], where=[("model", "==", "llama-3.1-8b")]), Top(7, "batch", smallest=True),
         Count(where=[("hardware", "!=", "h100-sxm"), ("memory_fits", "==", True)]))


def _expected(table: pd.DataFrame) -> tuple:
    """QUERY written as pandas on the whole table."""
    keep = table[(table.ttft_s <= 2.0) & (table.decode_tok_s_per_user >= 30.0)]
    fit = table[table.memory_fits]
    front = fit.iloc[pareto_front(fit.decode_tok_s_per_user.to_numpy(), fit.decode_tok_s_total.to_numpy())]
    return (len(table), keep.nlargest(10, "decode_tok_s_total").reset_index(drop=True), front.reset_index(drop=True),
            np.histogram(table.ttft_s[table.model == "llama-3.1-8b"], [0, 0.1, 1, 10])[0],
            table.nsmallest(7, "batch").reset_index(drop=True),
            int(((table.hardware != "h100-sxm") & table.memory_fits).sum()))


def _assert_same(got: tuple, want: tuple) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want):
        if isinstance(w, pd.DataFrame):
            pd.testing.assert_frame_equal(g, w)
        elif isinstance(w, np.ndarray):
            np.testing.assert_array_equal(g, w)
        else:
            assert g == w and type(g) is int


def test_best_is_nlargest_keep_first_ties_in_row_order():
    # values 3, 5, 5, 1, 5: the two largest are the 5s at 1 and 2 (of the three 5s, the first two);
    # the three largest all three 5s in row order; the two smallest 1 (index 3), then 3 (index 0).
    v = np.array([3.0, 5.0, 5.0, 1.0, 5.0])
    assert best(v, 2).tolist() == [1, 2]
    assert best(v, 3).tolist() == [1, 2, 4]
    assert best(v, 4).tolist() == [1, 2, 4, 0]
    assert best(v, 2, smallest=True).tolist() == [3, 0]
    assert best(v, 9).tolist() == [1, 2, 4, 0, 3]      # more asked than there are: all, best first
    s = pd.Series(v)
    assert best(v, 3).tolist() == s.nlargest(3).index.tolist()


def test_the_local_engine_reduces_to_the_pandas_query_on_the_whole_table():
    # Any chunk size: chunks of one block (97 rows holds no 96-point block twice), several blocks, all.
    table = sweep(**KW)
    assert len(table) == 3456 and 0 < table.memory_fits.sum() < len(table)
    want = _expected(table)
    assert len(want[2]) > 3 and len(want[1]) == 10
    for chunk in (97, 1000, 10_000):
        _assert_same(sweep(**KW, reduce=QUERY, chunk_size=chunk), want)


def test_the_dask_engine_reduces_in_a_tree_to_the_local_result():
    # Partitions of 40 rows: a group's grid is 6 batches x 16 prompts x 6 outputs, cut into blocks
    # of at most 40 points along the batch (1 x 16 x 6 = 96 > 40), then the prompts (halves: 8 x 6
    # = 48 > 40; thirds: 6 x 6 = 36): blocks of 6, 6, 4 prompts (36, 36, 24 points), 18 a group,
    # and no two neighbours fit 40 together, so a partition a block: 18 x 6 groups = 108. Merged
    # 16 at a time (SPLIT_EVERY): 108 -> 7 -> 1, so 7 + 1 merges, and the finish: 117 tasks.
    pytest.importorskip("dask")
    import dask
    module = sys.modules["membound.planning.sweep"]
    assert module.SPLIT_EVERY == 16
    lazy = sweep(**KW, reduce=QUERY, engine="dask", chunk_size=40)
    graph = dict(lazy.__dask_graph__())
    assert len([k for k in graph if isinstance(k, tuple) and k[1] == 0]) == 108
    assert len([k for k in graph if isinstance(k, tuple) and k[1] == 1]) == 7
    assert len([k for k in graph if isinstance(k, tuple) and k[1] == 2]) == 1
    assert len(graph) == 117
    with dask.config.set(scheduler="synchronous"):
        got = lazy.compute()
        whole = sweep(**KW, reduce=QUERY, engine="dask").compute()      # one partition a group
    want = _expected(sweep(**KW))
    _assert_same(got, want)
    _assert_same(whole, want)


def test_a_tree_names_its_partitions_apart_from_its_merges():
    # A distributed scheduler groups tasks by name (distributed.utils.key_split_group: a tuple
    # key's first item). The tree above: its 108 partition tasks under one name, its 7 + 1 merges
    # and the finish (9 tasks) under others, so the partitions are a group that depends on nothing:
    # root tasks, which the scheduler queues and hands out as workers free up. The same for a
    # fold merged in sweep's tree (merge=): 108 partitions, 7 + 1 merges and the last merge.
    pytest.importorskip("dask")
    split = pytest.importorskip("distributed.utils").key_split_group
    for lazy in (sweep(**KW, reduce=QUERY, engine="dask", chunk_size=40),
                 sweep(**KW, reduce=lambda acc, c: (acc or 0) + len(c), merge=operator.add, engine="dask",
                       chunk_size=40)):
        graph = dict(lazy.__dask_graph__())
        parts = [k for k in graph if isinstance(k, tuple) and k[1] == 0]
        rest = [k for k in graph if k not in parts]
        assert (len(parts), len(rest)) == (108, 9)
        assert len({split(k) for k in parts}) == 1 and not {split(k) for k in parts} & {split(k) for k in rest}


def test_a_partition_hands_dask_arrays_not_frames():
    # What a partition task returns is what dask sizes and sends: numbers and small numpy arrays.
    pytest.importorskip("dask")
    import dask
    lazy = sweep(**KW, reduce=QUERY, engine="dask", chunk_size=600)
    graph = dict(lazy.__dask_graph__())
    key = next(k for k in graph if isinstance(k, tuple) and k[1] == 0)
    with dask.config.set(scheduler="synchronous"):
        acc = dask.get(graph, key)
    n, top, front, hist, small, fits = acc
    assert isinstance(n, int) and isinstance(hist, np.ndarray)
    for rows in (top, small):
        assert isinstance(rows, dict) and all(type(v) is np.ndarray for v in rows.values())
        assert set(rows) == set(sweep(**{**KW, "batch": 1, "output_tokens": 1}).columns)


def test_nothing_kept_finishes_as_an_empty_result():
    # 70B bf16 fits no H100: no row passes memory_fits == True, so the front is an empty table
    # with the sweep's columns and kinds, the count 0, the histogram zeros.
    kw = dict(KW, model="llama-3.1-70b", hardware="h100-sxm")
    fits = [("memory_fits", "==", True)]
    n, front, hist = sweep(**kw, reduce=(Count(where=fits), Front(where=fits), Histogram("ttft_s", [0, 1], where=fits)))
    assert n == 0 and hist.tolist() == [0]
    assert len(front) == 0 and list(front.columns) == list(sweep(**kw).columns)
    assert front.model.dtype == "category" and front.batch.dtype == np.int64


def test_columns_narrow_the_rows_carried_and_keep_what_the_query_reads():
    # columns= selects the table's columns; those the query reads (ttft_s, decode_tok_s_per_user,
    # decode_tok_s_total) are evaluated too, in table order.
    top = sweep(**KW, columns=["model", "batch"], reduce=Top(3, "decode_tok_s_total", where=KEEP))
    assert list(top.columns) == ["model", "batch", "decode_tok_s_per_user", "decode_tok_s_total", "ttft_s"]
    pd.testing.assert_frame_equal(top, _expected(sweep(**KW))[1][top.columns].head(3))


def test_a_query_is_checked_before_anything_is_evaluated():
    with pytest.raises(InvalidInputError, match="reduce"):
        sweep(**KW, reduce=Count(where=[("no_such_column", "<", 1)]))
    with pytest.raises(InvalidInputError, match="model"):
        sweep(**KW, reduce=Count(where=[("model", "<", "llama")]))      # labels: == and != only
    with pytest.raises(InvalidInputError, match="number"):
        sweep(**KW, reduce=Count(where=[("ttft_s", "<", "2")]))
    with pytest.raises(InvalidInputError, match="where"):
        Count(where=[("ttft_s", "=<", 2.0)])
    with pytest.raises(InvalidInputError, match="k"):
        Top(0, "ttft_s")
    with pytest.raises(InvalidInputError, match="by"):
        sweep(**KW, reduce=Top(3, "model"))
    with pytest.raises(InvalidInputError, match="^y='model'.*a numeric column"):   # the field named: x or y
        sweep(**KW, reduce=Front(y="model"))
    with pytest.raises(InvalidInputError, match="^column='model'.*a numeric column"):
        sweep(**KW, reduce=Histogram("model", [0, 1]))
    with pytest.raises(InvalidInputError, match="edges"):
        Histogram("ttft_s", [1, 1])
    # a label no row carries is not an error: no row meets == (all meet !=)
    assert sweep(**KW, reduce=(Count(where=[("model", "==", "gpt-9")]), Count(where=[("model", "!=", "gpt-9")]))) \
        == (0, 3456)


def test_top_leaves_out_rows_whose_figure_is_missing_as_nsmallest_does():
    # a100-pcie-80gb has no price, so its cost per million tokens is NaN: the cheapest rows are
    # the priced device's (nsmallest leaves NaN out), and with only the unpriced device none.
    kw = dict(KW, model="llama-3.1-8b", hardware=["a100-pcie-80gb", "h100-sxm"])
    table = sweep(**kw)
    assert table.cost_per_million_tokens_usd.isna().sum() == len(table) // 2
    cheapest = sweep(**kw, reduce=Top(5, "cost_per_million_tokens_usd", smallest=True))
    pd.testing.assert_frame_equal(cheapest, table.nsmallest(5, "cost_per_million_tokens_usd").reset_index(drop=True))
    assert set(cheapest.hardware) == {"h100-sxm"}
    assert len(sweep(**dict(kw, hardware="a100-pcie-80gb"), reduce=Top(5, "cost_per_million_tokens_usd"))) == 0
