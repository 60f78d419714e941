"""A fixed sweep written as CSV, with its SHA-256: run it before and after a change to the sweep
or the core; the digests are equal when every figure is byte-identical (issue 33: outputs
unchanged).

Run:  python benchmarks/sweep_digest.py [out.csv]
      PYTHONPATH=/path/to/other/checkout/src python benchmarks/sweep_digest.py   # the other code

The grid: 3 models (dense, MoE, 70B on 8 chips) x 2 devices x 2 weight dtypes x batch x prompt x
output, every row kept (include_unfit), plus a speculative group; the DataFrame, the streamed
chunks and the numpy-only table must give the same bytes (checked here). Floats are written
with repr (17 significant digits), so a change in the last bit changes the digest.

A second digest covers a grid larger than one block (300,000 rows in 2 groups, so blocks and
chunks matter): the table sorted by its grid keys, every column's exact bits (labels as text),
so it holds when only the order of rows within a group changes.
"""
import numpy as np
import hashlib
import io
import sys

import pandas as pd

import membound as mb
from membound.planning.sweep import iter_sweep

GRID = dict(model=["llama-3.1-8b", "qwen3-30b-a3b", "llama-3.1-70b"], hardware=["h100-sxm", "mi300x"],
            weight_dtype=["bf16", "fp8"], n_chips=[1, 8], batch=[1, 3, 16, 64, 256],
            prompt_tokens=[0, 1, 500, 2048, 8191], output_tokens=[1, 2, 128, 1000],
            include_unfit=True, on_invalid="skip")
SPEC = dict(model="llama-3.1-70b", hardware="h100-sxm", n_chips=8, weight_dtype="fp8",
            speculative=mb.SpeculativeDecoding(draft="llama-3.2-1b", gamma=4, acceptance_rate=0.8),
            batch=[1, 8, 32], prompt_tokens=[0, 1024, 4096], output_tokens=[1, 256], include_unfit=True)


LARGE = dict(model=["llama-3.1-8b", "qwen3-30b-a3b"], hardware="h100-sxm", batch=list(range(1, 31)),
             prompt_tokens=list(range(0, 10000, 100)), output_tokens=list(range(1, 2000, 40)), include_unfit=True)


def sorted_digest(table) -> str:
    t = table.sort_values(["model", "batch", "prompt_tokens", "output_tokens"], ignore_index=True, kind="stable")
    h = hashlib.sha256()
    for name in t.columns:
        col = t[name]
        h.update(name.encode())
        h.update("\x1f".join(map(str, col)).encode() if isinstance(col.dtype, pd.CategoricalDtype)
                 else np.ascontiguousarray(col.to_numpy()).tobytes())
    return h.hexdigest()


def csv_bytes(table) -> bytes:
    out = io.StringIO()
    pd.DataFrame(table).to_csv(out, index=False, float_format=repr)
    return out.getvalue().encode()


def main():
    whole = pd.concat([mb.sweep(**GRID), mb.sweep(**SPEC)], ignore_index=True)
    streamed = pd.concat([*iter_sweep(**GRID, chunk_size=777), *iter_sweep(**SPEC, chunk_size=50)],
                         ignore_index=True)
    data = csv_bytes(whole)
    assert csv_bytes(streamed) == data, "streamed chunks differ from the table"
    plain = mb.sweep(**GRID, as_frame=False)
    assert csv_bytes(plain) == csv_bytes(mb.sweep(**GRID)), "the numpy-only table differs from the DataFrame"
    if len(sys.argv) > 1:
        with open(sys.argv[1], "wb") as f:
            f.write(data)
    print(f"{len(whole)} rows, {len(whole.columns)} columns, {len(data):,} bytes, "
          f"sha256 {hashlib.sha256(data).hexdigest()}")
    large = mb.sweep(**LARGE)
    print(f"{len(large)} rows sorted by grid keys, every column's bits: sha256 {sorted_digest(large)}")


if __name__ == "__main__":
    main()
