"""A wafer's own physics, from its architecture papers: a layer's GEMVs and collectives over the
square of cores it owns (Cerebras WSE). `core.floor_s` calls it. (A tensor-streaming chip's
exchange is `parallel.communication_s` over its directly wired node, its layout the pipeline rule of
`parallel.layout_for`, and the width its matrix units take weights at `operand_widening`; the
memory tiers of an RDU are `core.placement`'s.)

Wafer (Cerebras WSE). Facts:

- the fabric is a 2-D mesh; each core's router links to its four neighbours and to its own
  core through a "ramp"; a message is a stream of 32-bit wavelets, one wavelet per link per
  cycle, one cycle per hop (Cerebras SDK documentation, "A Conceptual View" of the WSE:
  sdk.cerebras.net; Luczynski et al., "Near-Optimal Wafer-Scale Reduce", HPDC 2024,
  arXiv:2404.15888, sec. 2-3);
- a collective's time on the WSE, validated there to within 4% on a CS-2:
  T = max(C, E/N) + L + (2 T_R + 1) D cycles, with C the most wavelets one core must take in
  (contention), E/N the wavelet-hops per link used (energy), L the longest path in hops
  (distance), D the dependent steps in series (depth) and T_R the cycles from a router to its
  core and back (T_R = 2 on the WSE-2; ibid., sec. 3, "performance model");
- a GEMV [1, K] x [K, M] on a P x P square of cores: the input vector's K/P slices are
  broadcast along one axis, each core multiplies its (K/P) x (M/P) block, and the partial
  outputs (M/P per core) are reduced along the other axis (He et al., "WaferLLM: Large Language
  Model Inference at Wafer Scale", OSDI 2025, arXiv:2502.04563: MeshGEMV, whose reduce is a
  K-tree that bounds the depth);
- a line collective call (one reduce or one broadcast) costs a constant beyond that model: measured
  on a WSE-3, 292-296 cycles a call at 240 and 360 cores a line and payloads of 1-60 wavelets, the
  call's set-up and its synchronous fabric operations' start and drain (WaferLLM's decode, its
  all-reduces built from the SDK's fabric operations: github.com/MeshInfra/WaferLLM,
  Decode/WSE-3/weak_scaling_figures.ipynb; `Fabric.call_cycles`, paid by every collective on a
  layer's path, not by the hidden state's walk, which is a stream);
- a core's GEMV is a loop of column operations, one `@fmach` over its outputs for each of its inputs
  (WaferLLM's decode.csl `vecmat_computation`: `@map` over the input slice), and each costs a fixed
  6.5 cycles beyond its weights at the SRAM ports' rate: simulated cycle by cycle for the WSE-3
  (`cslc --arch=wse3`, the SDK's fabric simulator), the same `@map`/`@fmach` loop takes 8.44 cycles
  an operation over 8 16-bit elements and 10.53-10.55 over 16, on 3 x 3 to 9 x 9 cores, less 0.25
  cycles an element (github.com/junesookang/WaferLLM @ b8f87d0, MeshGEMM/WSE-3-col-major/
  col-major-gemm.json; `Fabric.column_op_cycles`; docs/fast-chips.md);
- a 16- or 32-bit value travels one to a wavelet (the SDK's fabric data structures move one
  element per wavelet; an assumption where a kernel would pack two 16-bit values).

The reduce of B wavelets per core over n cores in a line takes, by that model, the better of a
chain (every core adds and forwards: C = B, L = n - 1, D = n - 1) and a binomial tree (depth
d = ceil(log2 n): C = B d, L = n - 1, D = d); a multicast broadcast C = B, L = n - 1, D = 1.
A decoder layer on its square, in the order its values depend on one another: an RMSNorm, the
q/k/v GEMV, the attention (`attention_cycles`), the o GEMV, a second RMSNorm, the gate/up GEMV,
the down GEMV, and the hidden state's walk to the next layer's square. The hidden state reaches a
square along one edge (the walk), so an RMSNorm is a line collective: its sum of squares reduced
along that edge and its scale sent along the line the next GEMV's outputs end on, one reduce and
one broadcast of one wavelet (WaferLLM's `rmsnorm_x_comm`: one all-reduce of `bsz` values along
one axis; MeshInfra/WaferLLM Decode/WSE-3/weak_scaling_figures.ipynb @ d19afd7, `COMM_PHASES`).
It runs beside the GEMV after it, because the arithmetic allows it exactly: an RMSNorm's scale is
one number per token, so (x g / rms) W = ((x g) W) / rms and the GEMV starts on x g while the sum
of squares is reduced (the layer pays the longer of the two).
The attention works on a cache laid over the square with the model's dimensions along the axis q
lands on and the cached tokens along the other (WaferLLM's decode.csl @ 683e6d5: `XKCache_tile`
and `XVCache_tile`, dim/P x seq_len/P a core): q, and the new token's k and v for the core that
holds its slot, are multicast along the tokens' axis; each core's partial scores cover its share
of a head's dimensions, so they are reduced over the cores that hold one head and sent back over
them (decode.csl's `score_comm`, one all-reduce along a line; WaferLLM runs one head, so its
segment is the whole line); one reduce along the tokens' axis then combines the partial maxima,
sums and weighted values, the sum a divisor applied after (online softmax: Milakov and
Gimelshein, "Online normalizer calculation for softmax", 2018, arXiv:1805.02867; the split-KV
combine of flash-decoding, Dao et al. 2023). The scores' payload (the cached tokens over the side)
and the cores' reads of the cache depend on the context, which a pass's floor does not see: they
are taken at one wavelet and nothing, a lower bound.
After the last layer, the LM head is one more GEMV on a square of its own, and the next token is
the largest logit: a reduce along the column its outputs end on (`head_cycles`). A wafer's cores go
to what it holds in proportion to its bytes, every core having the same SRAM: its layers, the LM
head on the last wafer and the untied input-embedding table on the first (`wafer_pass_s`).
The cores' own work is their share of the layer's weights: each weight read and its partial sum
read and written back, memory to memory, at the core's share of the SRAM bandwidth (21 PB/s
counts reads and writes alike; two read words and one write word a cycle, so the slower port's
share sets it: `local_bytes_per_weight`; the partial sum at the fabric's `partial_sum_bytes`: the
WSE-3's 4, 16-bit products added in 32 bits, as Cerebras documents its stack's arithmetic, "16-bit input
to arithmetic operations, and FP32 accumulations", docs.cerebras.net general/cs-1-data-formats, and as the
SDK's `@fmachs` does), or multiplied at their share of the compute peak, whichever is slower.

"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

import numpy as np

from .roofline import Num, maximum, minimum, where

if TYPE_CHECKING:
    from ..catalog.hardware import Hardware


class ModelConsts(Protocol):
    """The numbers of a model a wafer's layer reads (core.ModelConsts has them; dataflow sits below core,
    which calls it, so it names the fields rather than importing core)."""

    @property
    def n_layers(self) -> float: ...
    @property
    def hidden(self) -> float: ...
    @property
    def n_heads(self) -> float: ...
    @property
    def ffn(self) -> float: ...
    @property
    def kv_elems(self) -> float: ...
    @property
    def q_dim(self) -> float: ...
    @property
    def total_params(self) -> float: ...
    @property
    def lookup_params(self) -> float: ...
    @property
    def vocab(self) -> float: ...


def _ceil_log2(n: Num) -> Num:
    m = maximum(n, 1.0)
    return float(math.ceil(math.log2(m))) if isinstance(m, (int, float)) else np.ceil(np.log2(m))


def _ceil_sqrt(n: Num) -> Num:
    m = maximum(n, 1.0)
    return float(math.ceil(math.sqrt(m))) if isinstance(m, (int, float)) else np.ceil(np.sqrt(m))


def reduce_cycles(n: Num, wavelets: Num, ramp: Num, call: Num = 0.0) -> Num:
    """Cycles to reduce `wavelets` (B) wavelets per core over `n` cores in a line, by Luczynski et
    al.'s model, the best of their three forms: a chain, B + (n - 1) + (2 T_R + 1)(n - 1); a
    binomial tree, B d + (n - 1) + (2 T_R + 1) d with d = ceil(log2 n); and their two-phase
    reduce, chains in g = ceil(sqrt n) groups at once and then a chain over the g group heads,
    2 B + (n - 1) + (2 T_R + 1) 2 (g - 1); plus `call`, the call's own cycles (`Fabric.call_cycles`).
    0 for one core."""
    hops = maximum(n - 1.0, 0.0)
    step = 2.0 * ramp + 1.0
    d = _ceil_log2(n)
    g = _ceil_sqrt(n)
    chain = wavelets + hops + step * hops
    tree = wavelets * d + hops + step * d
    two_phase = 2.0 * wavelets + hops + step * 2.0 * (g - 1.0)
    return where(n > 1.0, minimum(minimum(chain, tree), two_phase) + call, 0.0) + 0.0


def broadcast_cycles(n: Num, wavelets: Num, ramp: Num, call: Num = 0.0) -> Num:
    """Cycles to multicast `wavelets` wavelets from one core to `n` in a line: B + (n - 1) +
    (2 T_R + 1), the wavelets following one another down the line, plus `call`, the call's own
    cycles; 0 for one core."""
    return where(n > 1.0, wavelets + (n - 1.0) + 2.0 * ramp + 1.0 + call, 0.0) + 0.0


PARTIAL_SUM_BYTES = 2.0   # the narrowest partial sum a core keeps: fp16 (CSL's @fmach, 16-bit multiply-add; WaferLLM's
                          # decode GEMV accumulates so: @fmach over f16 tiles, MeshInfra/WaferLLM Decode/WSE-3/src/decode.csl);
                          # a fabric's `partial_sum_bytes` (the default of `local_bytes_per_weight`'s)


READ_WORDS, WRITE_WORDS = 2.0, 1.0   # a core's datapath a cycle: two 64-bit reads and one 64-bit write of its SRAM
                                     # (S. Lie, 'Cerebras Architecture Deep Dive', cerebras.net 2022-08-29, the written
                                     # Hot Chips 34 talk; WSE-2; docs/fast-chips.md)


def local_bytes_per_weight(w_bytes: Num, partial_bytes: Num = PARTIAL_SUM_BYTES) -> Num:
    """SRAM bytes of a core's aggregate bandwidth one weight of its local GEMV takes: y[i] += A[i, j] x[j]
    memory to memory (a core's multiply-add takes memory operands: Cerebras' own matvec benchmark runs
    @fmacs(y_dest_dsr, y_src0_dsr, A_src1_dsr, x[j]) over y for each column j, csl-examples
    benchmarks/single-tile-matvec/src/pe_matvec.csl, and counts the "actual read/writes" as "read
    full x; read each col of V stack; read, write full y nb times = 3 nb^2 + nb", its run.py). Each
    weight reads the weight and its partial sum, w + p bytes, and writes the partial sum back, p bytes;
    p (`partial_bytes`, the fabric's `partial_sum_bytes`) is 2 where a core accumulates at 16 bits, the
    narrowest its floating-point multiply-add keeps (`@fmach`), and 4 where 16-bit products are added in
    32 bits (`@fmachs`). Reads and writes go through separate ports, two read words and one write word a
    cycle, so of the aggregate (21 PB/s counts reads and writes together) reads get 2/3 and writes 1/3,
    and the slower port sets the time: max(3/2 (w + p), 3 p) bytes of the aggregate. At p = 2 a 16-bit
    weight takes max(6, 6) = 6, the AXPY's 2:1 traffic matching the ports; below 16 bits the partial
    sum's write binds (6 for an 8-bit weight, not its 5 bytes moved); a 32-bit weight is read-bound, 9.
    At p = 4 the write binds up to 32-bit weights: max(9, 12) = 12 for a 16-bit weight, 12 for an 8-bit
    one, max(12, 12) = 12 for a 32-bit one."""
    total = READ_WORDS + WRITE_WORDS
    reads = (w_bytes + partial_bytes) * (total / READ_WORDS)
    writes = partial_bytes * (total / WRITE_WORDS)
    return maximum(reads, writes)


def gemv_cycles(k: Num, m: Num, side: Num, ramp: Num, local_per_weight: Num, call: Num = 0.0,
                column: Num = 0.0) -> Num:
    """Cycles of a GEMV [1, k] x [k, m] on a side x side square: the input's k/side slices
    broadcast along one axis, each core's (k/side)(m/side) weights at `local_per_weight` cycles
    each in k/side column operations of `column` cycles each beyond their weights (one `@fmach`
    over the core's m/side outputs for each of its inputs: `Fabric.column_op_cycles`), the m/side
    partial outputs per core reduced along the other axis (two calls of `call`)."""
    return broadcast_cycles(side, k / side, ramp, call) + k * m / side**2 * local_per_weight \
        + k / side * column + reduce_cycles(side, m / side, ramp, call)


def attention_cycles(c: ModelConsts, side: Num, ramp: Num, call: Num = 0.0) -> Num:
    """Cycles of one token's attention on a side x side square holding its cache (the module
    docstring): the multicast of q, k and v along the tokens' axis, (q + kv)/side wavelets; the
    partial scores' reduce and their return over the side/heads cores that hold one head (none
    where a core holds whole heads), one wavelet each; the combining reduce of q/side + 2 heads/side
    wavelets (the weighted values, each head's maximum and sum). Four line calls of `call`, or two."""
    q, kv, heads = c.q_dim, c.kv_elems, c.n_heads
    head_cores = maximum(side / heads, 1.0)
    scores = reduce_cycles(head_cores, 1.0, ramp, call) + broadcast_cycles(head_cores, 1.0, ramp, call)
    return broadcast_cycles(side, (q + kv) / side, ramp, call) + scores \
        + reduce_cycles(side, q / side + 2.0 * heads / side, ramp, call)


def layer_cycles(c: ModelConsts, side: Num, ramp: Num, local_per_weight: Num, call: Num = 0.0,
                 column: Num = 0.0) -> Num:
    """Cycles one decoder layer of `c` takes for one token on a side x side square of cores (the
    module docstring lists its steps); each line collective on its path pays `call`, each column
    operation of its GEMVs `column`."""
    q, kv, h, f = c.q_dim, c.kv_elems, c.hidden, c.ffn
    norm = reduce_cycles(side, 1.0, ramp, call) + broadcast_cycles(side, 1.0, ramp, call)
    qkv = gemv_cycles(h, q + kv, side, ramp, local_per_weight, call, column)
    gate_up = gemv_cycles(h, 2.0 * f, side, ramp, local_per_weight, call, column)
    rest = gemv_cycles(q, h, side, ramp, local_per_weight, call, column) \
        + gemv_cycles(f, h, side, ramp, local_per_weight, call, column)
    walk = h / side + side          # the hidden state's h/side wavelets per row to the next square
    return maximum(norm, qkv) + attention_cycles(c, side, ramp, call) + maximum(norm, gate_up) + rest + walk


def head_cycles(c: ModelConsts, side: Num, ramp: Num, local_per_weight: Num, call: Num = 0.0,
                column: Num = 0.0) -> Num:
    """Cycles of the LM head and the greedy pick of the next token on a side x side square: the
    GEMV [1, hidden] x [hidden, vocab] (`gemv_cycles`), whose row reduces end on one column of
    cores holding vocab/side logits each (each keeps the largest as its values arrive), then that
    column's reduce of one wavelet, the largest logit with its index (three calls of `call`; the
    GEMV's column operations `column` each)."""
    return gemv_cycles(c.hidden, c.vocab, side, ramp, local_per_weight, call, column) \
        + reduce_cycles(side, 1.0, ramp, call)


def _fastest(cycles: Callable[[Num], Num], smallest: Num, largest: Num) -> Num:
    """The fewest cycles `cycles(side)` takes over SIDES square sizes, a ladder down from `largest`
    (all the cores a layer owns) in steps of SIDE_STEP, those of at least `smallest` (the fewest cores
    that hold its weights; `largest` always): a larger square shortens the cores' own work and
    lengthens every collective's path. The ladder depends on nothing a weight's width sets, so
    narrower weights only add squares to choose from (a compiler can lay them out as it would wider
    ones) and never add cycles: the law `tests/test_laws.py` pins."""
    best = cycles(maximum(largest, 1.0))
    for i in range(1, SIDES):
        side = largest / SIDE_STEP**i
        best = where(side >= smallest, minimum(best, cycles(maximum(side, 1.0))), best)
    return best


def wafer_pass_s(c: ModelConsts, hw: Hardware, tp: Num, w_bytes: Num, layers_per_chip: Num) -> Num:
    """Seconds one token takes through every layer of `c` and its LM head on wafers (each holding
    `layers_per_chip` layers; tp wafers share a layer): their cycles at the fabric's clock. A
    wafer's cores are shared among what it holds in proportion to its bytes (every core has the
    same SRAM): its layers, the untied input-embedding table on the first wafer (a lookup: it holds
    cores and adds no cycles) and the LM head on the last (one wafer holds all three). The first
    and the last wafer are taken to hold a largest stage's layers. Each layer and the head map
    onto the square, between the fewest cores that hold their weights and all they own, that takes
    the fewest cycles (`_fastest`: the compiler's choice). 0 without a fabric."""
    fab = hw.fabric
    if fab is None:
        return 0.0
    clock = fab.clock_hz()
    sram = hw.memory[0]
    per_core = sram.capacity_bytes / fab.cores
    sram_bytes_per_cycle = sram.bandwidth_bytes_s / fab.cores / clock
    macs_per_cycle = max(hw.compute_flops.values()) / 2.0 / fab.cores / clock
    local = maximum(local_bytes_per_weight(w_bytes, fab.partial_sum_bytes) / sram_bytes_per_cycle,
                    1.0 / macs_per_cycle)
    ramp, call, column = float(fab.ramp_cycles), float(fab.call_cycles), float(fab.column_op_cycles)
    cores = fab.cores * tp
    layer_bytes = (c.total_params - c.lookup_params - c.vocab * c.hidden) / c.n_layers * w_bytes / tp
    head_bytes, lookup_bytes = c.vocab * c.hidden * w_bytes / tp, c.lookup_params * w_bytes / tp
    held = layers_per_chip * layer_bytes
    one = layers_per_chip >= c.n_layers           # one wafer holds the lookup, every layer and the head

    def layer(beside: Num) -> Num:                # a layer on a wafer that also holds `beside` bytes
        return _fastest(lambda s: layer_cycles(c, s, ramp, local, call, column), (layer_bytes / per_core) ** 0.5,
                        (cores * held / (held + beside) / layers_per_chip) ** 0.5)
    head = _fastest(lambda s: head_cycles(c, s, ramp, local, call, column), (head_bytes / per_core) ** 0.5,
                    (cores * head_bytes / (held + head_bytes + where(one, lookup_bytes, 0.0))) ** 0.5)
    alone = layer(0.0)
    several = c.n_layers * alone + layers_per_chip * (layer(lookup_bytes) - alone + layer(head_bytes) - alone)
    return (where(one, c.n_layers * layer(lookup_bytes + head_bytes), several) + head) / clock


def operand_widening(w_bytes: Num, operand_bytes: float | None) -> Num:
    """How many times its stored bytes a weight takes of a read stream that carries `operand_bytes`
    a weight (`MemoryTier.read_operand_bytes`): max(1, operand / stored); 1 where the stream carries
    weights as stored (None).

    A TSP's decode installs each weight once into its MXM arrays, on streams of 32 B a lane a cycle
    (ISCA 2020; the profile's `read_bytes_s`). The MXM multiplies int8 or fp16 (ISCA 2020, Table I),
    and a matrix product is cut into [1 x K] x [K x 320] sub-operations with K = 320 in int8 and
    K = 160 in fp16, four int8 or two fp16 of them a cycle (ISCA 2022, workload mapping; via the
    summary in github.com/flyjancy/AI-Chip-Library): the same bytes a cycle, half the weights in fp16.
    Groq's numerics store weights at lower precision and perform "all matrix operations at full
    precision" (TruePoint: groq.com/blog/inside-the-lpu-deconstructing-groq-speed, 2025-08-01), so an
    int8 weight enters the MXM as fp16: 2 bytes of the stream, 2x its stored byte."""
    if operand_bytes is None:
        return 1.0
    return maximum(operand_bytes / w_bytes, 1.0)


SIDES = 16             # square sizes compared, a ladder down from all the cores a layer (or the head) owns
SIDE_STEP = 2.0**0.125  # the ladder's ratio: 9% a step, down to 1/3.7 of the largest side; the integer optimum's
                        # cycles within 0.6% on the catalogued models of up to 70B (bf16, fp8, int4), measured
