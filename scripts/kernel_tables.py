"""What NVIDIA's published kernel timings say a Llama-2-70B decoder layer costs at decode batches (issue 29, a diagnosis).

    PYTHONPATH=src python scripts/kernel_tables.py AICONFIGURATOR

AICONFIGURATOR: a checkout of github.com/ai-dynamo/aiconfigurator (read at 095f58a), or its bare git directory (the
tables are read from HEAD with `git show`). The tables (CUDA-graph replay, weights copied past the L2; collector/
trtllm/collect_gemm.py, collector/helper.py) are kernel timings, not LLM benchmark results. Printed per chip:
- the four layer GEMMs of Llama-2-70B at tensor 1 (QKV 10240 x 8192, O 8192 x 8192, gate-up 57344 x 8192, down
  8192 x 28672; N and K interpolated linearly between the table's grid points) summed at each M, less the dynamic
  activation scale the fp8 rows include (its own table; the MLPerf engines' scales are static), and the rate the
  weights are read at, beside membound's read at the profile's achievable bandwidth;
- TensorRT-LLM's custom all-reduce latency at decode message sizes, beside membound's link term (2 hops x the
  profile's latency on a switched node, plus 2(tp-1)/tp of the bytes over the link);
- the generation attention kernel at Llama-2-70B's heads (64 query, 8 KV, head 128) and fp8 KV.
No prediction is changed (data/reference/mlperf/README.md "The decode GEMMs' weight read and the all-reduce").

    PYTHONPATH=src python scripts/kernel_tables.py AICONFIGURATOR --shares

prints the hardware profiles' achievable.weight_read_by_format and expert_read_by_format (helper mlperf21): per chip
and weight format, the median over M = 1..128 of the share of the profile's achievable bandwidth at which the
dense GEMMs above read Llama-2-70B's layer weights (static scales), and the median over 4..128 tokens of the share
at which TensorRT-LLM's fused MoE (moe/trtllm/1.2.0rc5/moe_perf.parquet; op moe, tensor 1, expert 1, 'balanced'
routing: min(8, 2 x tokens) experts touched, so every expert from 4 tokens on) reads Mixtral-8x7B's experts (8
experts, top 2, hidden 4,096, expert FFN 14,336: 3 x 4,096 x 14,336 weights an expert), the cutlass kernel
('moe_torch_flow_min_latency' rows at nvfp4 read faster than the chip's peak: they do not stream every expert and
are left out).

    PYTHONPATH=src python scripts/kernel_tables.py AICONFIGURATOR --steps

decomposes the measured step of the Server and Interactive rows of the dense Llama benchmarks whose chip and weight
format have a table (B200 nvfp4, H200 and H100 SXM fp8; helper mlperf22, a diagnosis: no prediction changed). Per
row group (round, family, benchmark, scenario; medians over its rows): the decoding batch by Little's law
(`mlperf_validate.little_batch`), the tokens a step carries M = batch x (1 + mean prompt / mean output) (each
sequence's prompt is prefilled once in its output's steps), the measured median TPOT (the mean step a sequence
sees), the model's (`mlperf_validate.tpot_at_batch`), and the measured step less what the tables and the profile
price: the layer GEMMs at M (the table, interpolated in M, N and K; tensor-parallel shapes), TensorRT-LLM's custom
all-reduce of the step's M x hidden bf16 activations twice a layer (tensor > 1), and the KV read (each decoding
sequence attends its prompt plus, on average, E[O^2] / 2E[O] of its output; the profile's achievable bandwidth).
What is left holds the context attention, the element-wise kernels, the launches and any host time.

    PYTHONPATH=src python scripts/kernel_tables.py AICONFIGURATOR --curves

prints the hardware profiles' achievable.gemm_time_by_tokens (issue 29, helper te23): per tabled part and weight
format (h100-sxm and h200 fp8, b200 nvfp4), at every M of its table, the seconds a weight of a dense layer GEMM
takes: Llama-2-70B's four layer GEMMs at tensor 1 summed (as above, fp8's dynamic-scale rows as they are) over their
855,638,016 weights. The runtimes whose served block sets gemm_time (Served.gemm_time) price a dense model's layer
GEMMs of a pass of M tokens as this figure at M x the layer weights a rank holds (core.tabled_gemm_s).

    PYTHONPATH=src python scripts/kernel_tables.py AICONFIGURATOR --allreduce

prints the hardware profiles' achievable.allreduce_time_by_bytes (issue 29, helper ar23): per tabled part (h100-sxm,
h200, b200) and rank count (2, 4, 8), TensorRT-LLM 1.2.0rc5's all-reduce at every message size of its table
(comm/trtllm/1.2.0rc5/custom_allreduce_perf.parquet: bf16, AllReduceStrategy AUTO with the autotuner off, so the
Lamport custom kernels where they apply; five all-reduces a CUDA graph, 20 replays; collector/network/
collect_all_reduce.py), the message in bytes (2 a bf16 value) and the seconds an all-reduce takes. The runtimes
whose served block sets allreduce_time (Served.allreduce_time) price a tensor-parallel pass's two all-reduces a
layer of M x hidden x 2 bytes as this figure at that size (parallel.collective_s), where the part has a table for
the pass's tensor-parallel ranks.
"""
from __future__ import annotations

import io
import math
import subprocess
import sys
from pathlib import Path

import pandas as pd

from membound.catalog.hardware import load_hardware
from membound.catalog.model import load_model

DATA = "aic-core/src/aiconfigurator_core/systems/data"
SHAPES = ((10240, 8192), (8192, 8192), (57344, 8192), (8192, 28672))    # (N, K) of Llama-2-70B's layer GEMMs
PARAMS = sum(n * k for n, k in SHAPES)                                   # 855.6 M weights a layer
BYTES = {"fp8": 1.0, "fp8_static": 1.0, "nvfp4": 0.5 + 1 / 16}          # nvfp4: a 1-byte scale per 16 weights
CHIPS = (("h100-sxm", "h100_sxm", "fp8"), ("h200", "h200_sxm", "fp8"), ("b200", "b200_sxm", "nvfp4"),
         ("b200", "b200_sxm", "fp8_static"))


def table(root: Path, rel: str) -> pd.DataFrame:
    """One parquet table of the checkout (or of the bare repository's HEAD)."""
    path = root / DATA / rel
    if path.exists():
        return pd.read_parquet(path)
    blob = subprocess.run(["git", "--git-dir", str(root), "show", f"HEAD:{DATA}/{rel}"], check=True,
                          capture_output=True).stdout
    return pd.read_parquet(io.BytesIO(blob))


def gemm_table(root: Path, folder: str, fmt: str) -> pd.DataFrame:
    """The GEMM timings of one part (`folder`) and weight format, the deepgemm kernels' rows left out."""
    g = table(root, f"{folder}/gemm/trtllm/1.2.0rc5/gemm_perf.parquet")
    return g[(g.gemm_dtype == fmt) & (g.kernel_source != "deepgemm")]


def between(x: float, grid: list, at) -> float:
    """`at` at x, linear between the grid points either side of it (clamped to the grid's ends)."""
    x = min(max(x, grid[0]), grid[-1])
    lo, hi = max(g for g in grid if g <= x), min(g for g in grid if g >= x)
    return at(lo) if lo == hi else at(lo) + (at(hi) - at(lo)) * (x - lo) / (hi - lo)


def gemm_us(d: pd.DataFrame, m: int, n: int, k: int) -> float:
    """Microseconds of an M x N x K GEMM from the table `d` (one format), interpolated in N and K."""
    s = d[d.m == m]

    def at(nn, kk):
        return 1e3 * float(s[(s.n == nn) & (s.k == kk)].latency.min())
    return between(n, sorted(s.n.unique()), lambda nn: between(k, sorted(s.k.unique()), lambda kk: at(nn, kk)))


def scale_us(c: pd.DataFrame, m: int, k: int) -> float:
    """Microseconds of the dynamic activation scale of an M x K input (the fp8 rows include it), interpolated in
    M and K."""
    def at_m(mm):
        s = c[c.m == mm]
        return between(k, sorted(s.k.unique()), lambda kk: 1e3 * float(s[s.k == kk].latency.min()))
    return between(m, sorted(c.m.unique()), at_m)


def gemms(root: Path, chip: str, folder: str, fmt: str) -> None:
    d = gemm_table(root, folder, fmt)
    scales = table(root, f"{folder}/quantize/trtllm/1.2.0rc5/computescale_perf.parquet") if fmt == "fp8" else None
    hw = load_hardware(chip)
    peak = sum(t.bandwidth_bytes_s for t in hw.memory)
    achievable = peak * hw.achievable.bandwidth_fraction
    weight_bytes = PARAMS * BYTES[fmt]
    print(f"{chip} {fmt}: {weight_bytes / 1e6:.1f} MB a layer; membound reads it in {1e6 * weight_bytes / achievable:.1f} us "
          f"(the profile's achievable {achievable / 1e12:.2f} TB/s)")
    for m in [int(m) for m in sorted(d.m.unique()) if m <= 256]:
        total = sum(gemm_us(d, m, n, k) for n, k in SHAPES)
        static = total - (sum(scale_us(scales, m, k) for _, k in SHAPES) if scales is not None else 0.0)
        rate = weight_bytes / (static * 1e-6)
        print(f"  M {m:>4}: {total:6.1f} us, static scales {static:6.1f} us: read {rate / 1e12:.2f} TB/s = "
              f"{rate / peak:.3f} of peak, {rate / achievable:.3f} of achievable")


def dense_share(root: Path, chip: str, folder: str, fmt: str) -> float:
    """The median over M = 1..128 of the share of `chip`'s achievable bandwidth the layer GEMMs read at."""
    d = gemm_table(root, folder, fmt)
    scales = table(root, f"{folder}/quantize/trtllm/1.2.0rc5/computescale_perf.parquet") if fmt == "fp8" else None
    hw = load_hardware(chip)
    achievable = sum(t.bandwidth_bytes_s for t in hw.memory) * hw.achievable.bandwidth_fraction
    shares = []
    for m in [int(m) for m in sorted(d.m.unique()) if m <= 128]:
        total = sum(gemm_us(d, m, n, k) for n, k in SHAPES)
        static = total - (sum(scale_us(scales, m, k) for _, k in SHAPES) if scales is not None else 0.0)
        shares.append(PARAMS * BYTES[fmt] / (static * 1e-6) / achievable)
    return float(pd.Series(shares).median())


EXPERT = 3 * 4096 * 14336      # weights of one Mixtral-8x7B expert (gate, up, down)


def expert_share(root: Path, chip: str, folder: str, fmt: str) -> float:
    """The median over 4..128 tokens of the share of `chip`'s achievable bandwidth TensorRT-LLM's fused MoE reads
    Mixtral-8x7B's touched experts at (module docstring)."""
    d = table(root, f"{folder}/moe/trtllm/1.2.0rc5/moe_perf.parquet")
    s = d[(d.hidden_size == 4096) & (d.inter_size == 14336) & (d.num_experts == 8) & (d.topk == 2)
          & (d.moe_dtype == fmt) & (d.moe_tp_size == 1) & (d.moe_ep_size == 1) & (d.distribution == "balanced")
          & (d.kernel_source != "moe_torch_flow_min_latency") & (d.num_tokens >= 4) & (d.num_tokens <= 128)]
    hw = load_hardware(chip)
    achievable = sum(t.bandwidth_bytes_s for t in hw.memory) * hw.achievable.bandwidth_fraction
    per = EXPERT * {"fp8": 1.0, "nvfp4": BYTES["nvfp4"], "bfloat16": 2.0}[fmt]
    rates = [min(8, 2 * t) * per / (lat * 1e-3) / achievable for t, lat in zip(s.num_tokens, s.latency)]
    return float(pd.Series(rates).median())


def shares(root: Path) -> None:
    for chip, folder in dict.fromkeys((chip, folder) for chip, folder, _ in CHIPS):    # each tabled part once
        dense = {"fp8": dense_share(root, chip, folder, "fp8" if chip != "b200" else "fp8_static")}
        expert = {"fp8": expert_share(root, chip, folder, "fp8")}
        if chip == "b200":
            dense["nvfp4"] = dense_share(root, chip, folder, "nvfp4")
            expert["nvfp4"] = expert_share(root, chip, folder, "nvfp4")
        print(f"{chip}: weight_read_by_format {{{', '.join(f'{k}: {v:.3f}' for k, v in dense.items())}}}, "
              f"expert_read_by_format {{{', '.join(f'{k}: {v:.3f}' for k, v in expert.items())}}}")


def allreduce(root: Path, chip: str, folder: str, version: str) -> None:
    d = table(root, f"{folder}/comm/trtllm/{version}/custom_allreduce_perf.parquet")
    link = load_hardware(chip).interconnect
    hops = 2.0 if link.topology == "switch" else None
    print(f"{chip} TensorRT-LLM custom all-reduce ({version}, bf16), us; membound's term beside it")
    for tp in (2, 4, 8):
        s = d[d.num_gpus == tp].sort_values("message_size")
        cells = []
        for elems, lat in zip(s.message_size, s.latency):
            if elems > 1 << 20:
                break
            model = (hops or 2.0 * (tp - 1)) * link.latency_s + 2 * (tp - 1) / tp * 2 * elems / link.bandwidth_bytes_s
            cells.append(f"{elems}: {1e3 * lat:.1f}/{1e6 * model:.1f}")
        print(f"  tp {tp}: " + ", ".join(cells))


def attention(root: Path, chip: str, folder: str) -> None:
    d = table(root, f"{folder}/attention/trtllm/1.2.0rc5/generation_attention_perf.parquet")
    s = d[(d.num_heads == 64) & (d.num_key_value_heads == 8) & (d.head_dim == 128) & (d.window_size == 0)
          & (d.kv_cache_dtype == "fp8")]
    p = s.pivot_table(index="batch_size", columns="step", values="latency", aggfunc="min") * 1e3
    print(f"{chip} generation attention, 64 / 8 heads, fp8 KV, us a layer (rows: batch; columns: context)")
    print(p[[c for c in p.columns if c <= 1023]].round(1).to_string())


TABLED = {(chip, fmt): folder for chip, folder, fmt in CHIPS if fmt != "fp8_static"}
"""(membound chip, weight format) -> the part's folder: the formats the MLPerf rows run with a GEMM table (b200 nvfp4,
h200 and h100-sxm fp8; B200's static-scale fp8 rows are `gemms`' and `--shares`' alone)."""
STEP_BENCHMARKS = ("llama2-70b", "llama3.1-405b", "llama3.1-8b")


def layer_shapes(preset: str, tp: int) -> tuple[tuple[tuple[int, int], ...], int, int, int]:
    """((N, K) of a dense Llama decoder layer's four GEMMs on one of `tp` ranks), layers, hidden, KV heads a rank."""
    m = load_model(preset)
    hd, h = m.head_dim, m.hidden_size
    shapes = (((m.n_heads + 2 * m.n_kv_heads) * hd // tp, h), (h, m.n_heads * hd // tp),
              (2 * m.ffn_size // tp, h), (h, m.ffn_size // tp))
    return shapes, m.n_layers, h, max(1, m.n_kv_heads // tp)


def gemm_step_ms(d: pd.DataFrame, shapes, layers: int, tokens: float) -> float:
    """Milliseconds of a step's layer GEMMs at `tokens` rows from the table `d`, linear in M between grid points."""
    grid = [int(m) for m in sorted(d.m.unique())]
    return 1e-3 * layers * between(tokens, grid, lambda m: sum(gemm_us(d, m, n, k) for n, k in shapes))


def allreduce_step_ms(d: pd.DataFrame, tp: int, layers: int, elements: float) -> float:
    """Milliseconds of two custom all-reduces a layer of `elements` bf16 values each (the table, linear in size)."""
    if tp == 1:
        return 0.0
    s = d[(d.num_gpus == tp) & (d.allreduce_dtype == "bfloat16")].sort_values("message_size")
    lat = dict(zip(s.message_size.astype(int), s.latency))
    return 2 * layers * between(elements, sorted(lat), lambda e: float(lat[e]))


def step_rows(root: Path) -> pd.DataFrame:
    """One line per Server / Interactive row with a table: batch, M, measured and model TPOT, the priced terms."""
    from membound.fidelity import mlperf_rows, mlperf_validate
    from membound.serving.api import build
    rows, _ = mlperf_rows.load_rows()
    benches = mlperf_rows.load_benchmarks()
    gemm_tables: dict = {}
    out = []
    for r in rows:
        fmt = r.quantization.weights
        folder = TABLED.get((r.device, fmt))
        if (r.scenario == "Offline" or r.benchmark not in STEP_BENCHMARKS or folder is None
                or r.launch is not None and r.launch.context is not None or not math.isfinite(r.tpot_p50_s)):
            continue
        bench = benches[r.benchmark]
        runtime = mlperf_rows.launched(mlperf_rows.runtime_of(r.engine, r.executor, r.round), r.launch, r.device)
        caps = mlperf_rows.row_limits(bench, r.engine, r.device, r.round, r.scenario, r.launch)
        lay = next(iter(mlperf_validate.row_layouts(bench, r.engine, r.device, r.round, r.quantization.weights,
                                                    r.per_node, r.launch, r.domain)))
        sm, sched, _ = build(bench.preset, r.device, prompt=bench.prompt, output=bench.output,
                             quantization=r.quantization, runtime=runtime, n_chips=lay.chips, parallel=lay,
                             scheduler=caps)
        batch = mlperf_validate.little_batch(r.measured, lay.chips, r.tpot_p50_s)
        if (folder, fmt) not in gemm_tables:
            gemm_tables[folder, fmt] = gemm_table(root, folder, fmt)
        shapes, layers, hidden, kv_heads = layer_shapes(bench.preset, lay.chips)
        p, o = bench.prompt.mean, bench.output.mean
        tokens = batch * (1.0 + p / o)
        o2 = float(pd.Series(bench.output.values).pow(2).mean()) if hasattr(bench.output, "values") else o * o
        context = p + o2 / (2.0 * o)
        hw = load_hardware(r.device)
        achievable = sum(t.bandwidth_bytes_s for t in hw.memory) * hw.achievable.bandwidth_fraction
        kv_bytes = 0.5 if r.quantization.kv == "fp4" else 1.0 if r.quantization.kv == "fp8" else 2.0
        kv_ms = 1e3 * batch * context * layers * 2 * kv_heads * load_model(bench.preset).head_dim * kv_bytes / achievable
        ar = table(root, f"{folder}/comm/trtllm/1.2.0rc5/custom_allreduce_perf.parquet") if lay.chips > 1 else None
        ar_ms = allreduce_step_ms(ar, lay.chips, layers, tokens * hidden) if ar is not None else 0.0
        gemm_ms = gemm_step_ms(gemm_tables[folder, fmt], shapes, layers, tokens)
        measured = 1e3 * r.tpot_p50_s
        mp = sm.terms(batch, c=tokens - batch)       # the model's pass of the same step, its chunk's attention aside
        out.append({"round": r.round, "family": r.family, "benchmark": r.benchmark, "scenario": r.scenario,
                    "executor": r.executor, "tp": lay.chips, "batch": batch, "M": tokens, "measured": measured,
                    "model": 1e3 * mlperf_validate.tpot_at_batch(sm, sched, bench, batch), "gemm": gemm_ms,
                    "allreduce": ar_ms, "kv": kv_ms, "rest": measured - gemm_ms - ar_ms - kv_ms, "layers": layers,
                    "m_comp": 1e3 * float(mp.comp), "m_comm": 1e3 * float(mp.comm), "m_over": 1e3 * float(mp.over)})
    return pd.DataFrame(out)


def steps(root: Path) -> None:
    d = step_rows(root)
    keys = ["round", "family", "benchmark", "scenario", "executor", "tp", "layers"]
    g = d.groupby(keys).median(numeric_only=True)
    g["rows"] = d.groupby(keys).size()
    g["rest_us_layer"] = 1e3 * g["rest"] / g.index.get_level_values("layers")
    print("median over each group's rows; ms a step unless named (measured = median TPOT; rest = measured - gemm - "
          "allreduce - kv; m_comp, m_comm, m_over: the model's pass of the same M tokens, its FLOP seconds (GEMMs, "
          "heads, decode attention), collectives and runtime overheads)")
    print(g[["rows", "batch", "M", "measured", "model", "gemm", "m_comp", "allreduce", "m_comm", "kv", "rest", "m_over",
             "rest_us_layer"]].round(1).to_string())


def curve(root: Path, folder: str, fmt: str) -> tuple[list[int], list[float]]:
    """(M grid, seconds a weight) of one part and format: at each of the table's M, the summed time of
    Llama-2-70B's four layer GEMMs at tensor 1 (N and K interpolated as `gemm_us` does; fp8's dynamic-scale
    rows as they are) over their PARAMS weights (the hardware profiles' achievable.gemm_time_by_tokens)."""
    d = gemm_table(root, folder, fmt)
    grid = sorted(int(m) for m in d.m.unique())
    return grid, [1e-6 * sum(gemm_us(d, m, n, k) for n, k in SHAPES) / PARAMS for m in grid]


def curves(root: Path) -> None:
    """Prints each tabled part's achievable.gemm_time_by_tokens block (5 significant digits)."""
    for (chip, fmt), folder in TABLED.items():
        grid, per_weight = curve(root, folder, fmt)
        print(f"{chip}: gemm_time_by_tokens {fmt} ({len(grid)} points; at M = 512: "
              f"{1e3 * 80 * PARAMS * per_weight[grid.index(512)]:.2f} ms for Llama-2-70B's 80 layers)")
        print(f"    {fmt}:")
        print(f"      tokens: [{', '.join(str(m) for m in grid)}]")
        print(f"      seconds_per_weight: [{', '.join(f'{s:.5g}' for s in per_weight)}]")


ALLREDUCE = "comm/trtllm/1.2.0rc5/custom_allreduce_perf.parquet"


def allreduce_curve(root: Path, folder: str, ranks: int) -> tuple[list[int], list[float]]:
    """(message bytes, seconds) of one part's bf16 all-reduce over `ranks` GPUs: TensorRT-LLM 1.2.0rc5's table
    (message_size in bf16 values, 2 bytes each; latency in ms), one row a size (the hardware profiles'
    achievable.allreduce_time_by_bytes)."""
    d = table(root, f"{folder}/{ALLREDUCE}")
    s = d[(d.num_gpus == ranks) & (d.allreduce_dtype == "bfloat16")].sort_values("message_size")
    if s.message_size.duplicated().any():
        raise ValueError(f"{folder}: more than one timing a message size at {ranks} ranks")
    return [2 * int(e) for e in s.message_size], [1e-3 * float(t) for t in s.latency]


def allreduces(root: Path) -> None:
    """Prints each tabled part's achievable.allreduce_time_by_bytes block (5 significant digits)."""
    for chip, folder in dict.fromkeys((chip, folder) for chip, folder, _ in CHIPS):    # each tabled part once
        print(f"{chip}: allreduce_time_by_bytes ({ALLREDUCE})")
        for ranks in (2, 4, 8):
            size, seconds = allreduce_curve(root, folder, ranks)
            print(f'    "{ranks}":')     # a quoted key: the profiles' YAML stays a JSON document's
            print(f"      bytes: [{', '.join(str(b) for b in size)}]")
            print(f"      seconds: [{', '.join(f'{t:.5g}' for t in seconds)}]")


def main(argv: list[str]) -> int:
    modes = {"--shares": shares, "--steps": steps, "--curves": curves, "--allreduce": allreduces}
    if len(argv) not in (1, 2) or (len(argv) == 2 and argv[1] not in modes):
        print(__doc__)
        return 2
    root = Path(argv[0])
    if len(argv) == 2:
        modes[argv[1]](root)
        return 0
    for chip, folder, fmt in CHIPS:
        gemms(root, chip, folder, fmt)
    for chip, folder, version in (("h100-sxm", "h100_sxm", "1.3.0rc10"), ("h200", "h200_sxm", "1.2.0rc5"),
                                  ("b200", "b200_sxm", "1.3.0rc10")):
        allreduce(root, chip, folder, version)
    for chip, folder in (("h200", "h200_sxm"), ("b200", "b200_sxm")):
        attention(root, chip, folder)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
