"""Matrix units beside the shader ALUs (Apple M5's GPU Neural Accelerators): a runtime whose prefill
GEMMs multiply on them (runtime.MatrixUnits) keeps the rest of their work, attention and decode on the
shader ALUs (Hardware.shader_flops). Numbers derived by hand."""
import pytest
from hypothesis import given
from hypothesis import strategies as st

import membound as mb
from membound.physics.core import on_matrix_units
from membound.errors import MemboundError
from membound.physics.estimate import prepare
from membound.catalog.runtime import MatrixUnits, Runtime, RuntimeEntry
from membound.physics.efficiency import efficiency

P_MATRIX, P_SHADER = 15.04e12, 3.76e12      # apple-m5: 4 x fp32 (Apple's 'over 4x'), the fp32 rate
PARAMS, V, H = 6_738_415_616, 32000, 4096   # llama-2-7b; the untied input embedding is a lookup
LAYERS = 2 * (PARAMS - 2 * V * H) * 512     # the layers' GEMM FLOPs over a 512-token prompt
HEAD = 2 * V * H                            # the LM head, for the last token only
ATTN = 4 * 32 * 128 * 32 * 512 * 511 / 2    # QK^T and AV over the causal pairs, 32 layers x 32 heads x 128
KW = dict(batch=1, prompt_tokens=512, output_tokens=1, weight_dtype="q4_0", kv_dtype="fp16")
DQ = 1 + 1 / 9                              # q4_0's GEMM work with its weight-only dequantisation (MARLIN:
                                            # a compute-bound W4A16 GEMM at 0.9 of FP16's rate)


UNITS = MatrixUnits()


def _rt(c: float, units: MatrixUnits | None = UNITS, **entry) -> Runtime:
    return Runtime(name="t", use_latency_floor=False, use_device_fractions=False, matrix_units=units,
                   classes={"default": RuntimeEntry(bandwidth_fraction=1.0, compute_fraction=c, **entry)})


def _pre(hw, rt, **kw) -> float:
    return prepare("llama-2-7b", hw, runtime=rt, **{**KW, **kw}).evaluate()["prefill_compute_s"]


def test_a_prefill_gemm_multiplies_on_the_matrix_units_and_stages_on_the_shader_alus():
    c = 0.75
    # on the shader ALUs alone a GEMM of F FLOPs takes F x DQ / (c x 3.76e12) (q4_0: +1/9 weight-only
    # dequantisation); its multiply-accumulates, F / 3.76e12 of it, move to the accelerators (F / 15.04e12),
    # the rest, F x (DQ - c) / (c x 3.76e12), stays; the LM head (one token: a mat-vec) and attention
    # run on the shader ALUs
    layers = LAYERS / 15.04e12 + LAYERS * (DQ - 0.75) / (0.75 * 3.76e12)
    head = HEAD * DQ / (0.75 * 3.76e12)
    attn = ATTN / (0.75 * 3.76e12)
    assert _pre("apple-m5", _rt(c)) == pytest.approx(layers + head + attn, rel=1e-9)
    # a runtime without the rule runs everything at the profile's peak, the accelerators' 15.04e12
    assert _pre("apple-m5", _rt(c, None)) == pytest.approx(
        (LAYERS + HEAD) * DQ / (0.75 * 15.04e12) + ATTN / (0.75 * 15.04e12), rel=1e-9)
    # ... and one that runs attention there too moves only that term
    assert _pre("apple-m5", _rt(c, MatrixUnits(attention=True))) == pytest.approx(
        layers + head + ATTN / (0.75 * 15.04e12), rel=1e-9)
    # the layers' GEMMs: (DQ / 0.75) / (1/4 + (DQ - 0.75)/0.75) = 1.4815 / 0.7315 = 2.025 x the
    # shader-only rate, not 4 x
    shader_only = LAYERS * DQ / (0.75 * 3.76e12)
    assert shader_only / layers == pytest.approx((DQ / 0.75) / (0.25 + (DQ - 0.75) / 0.75), rel=1e-12)


def test_chips_without_matrix_units_are_unchanged_by_the_rule():
    # the M4 has no shader_flops: the rule does nothing, every GEMM at its 3.76e12 fp32 = fp16 rate
    c = 0.75
    both = [_pre("apple-m4", _rt(c, u)) for u in (MatrixUnits(), None)]
    assert both[0] == both[1] == pytest.approx((LAYERS + HEAD) * DQ / (0.75 * 3.76e12)
                                               + ATTN / (0.75 * 3.76e12), rel=1e-9)
    # no M1-M4 profile has a shader rate apart from its peak
    assert not any(mb.load_hardware(f"apple-{n}").shader_flops for n in ("m1", "m2-ultra", "m3-max", "m4-max"))


def test_decode_keeps_the_shader_rate():
    # a decode step is a mat-vec (kernel_mul_mv: no tensor API): at context 0 and overlap 0 its weights'
    # stream plus its FLOPs at the shader rate, c x 3.76e12, with the 1/9 dequantisation
    c = 0.75
    m = mb.load_model("llama-2-7b")
    kw = dict(batch=1, prompt_tokens=0, output_tokens=1, weight_dtype="q4_0", kv_dtype="fp16")
    r = mb.estimate(m, "apple-m5", runtime=_rt(c, overlap=0.0), **kw)
    # q4_0: 4.5 bits, the LM head q6_K's 6.5625 (llama.cpp's quantizer: quantization.py); 153 GB/s
    mem = ((PARAMS - V * H + H) * 4.5 + V * H * (6.5625 - 4.5)) / 8 / 153e9
    cmp = 2 * (PARAMS - V * H) * DQ / (0.75 * 3.76e12)
    assert 1 / r.decode_tok_s_per_user == pytest.approx(mem + cmp, rel=1e-9)


def test_bundled_llama_cpp_metal_on_an_m5_runs_prefill_gemms_on_the_neural_accelerators():
    rt = mb.load_runtime("llama.cpp")                    # the plain name: its Metal backend on Apple
    m5, m4 = mb.load_hardware("apple-m5"), mb.load_hardware("apple-m4")
    eff = efficiency(rt, m5)
    c = eff.compute_fraction                             # the fit on M1-M4 rows (0.7683 on 2026-12-01)
    assert eff.matrix_units is not None and efficiency(rt, m4).matrix_units is None
    # pp512's compute term on the M5 = the formula of the first test with the fitted c
    expect = (LAYERS / 15.04e12 + LAYERS * (DQ - c) / (c * 3.76e12)
              + HEAD * DQ / (c * 3.76e12) + ATTN / (c * 3.76e12))
    kw = dict(batch=1, prompt_tokens=512, output_tokens=1, weight_dtype="q4_0", kv_dtype="fp16")
    assert prepare("llama-2-7b", "apple-m5", runtime="llama.cpp", **kw).evaluate()["prefill_compute_s"] \
        == pytest.approx(expect, rel=1e-9)
    # the M4 (same 10 cores, same assumed clock): everything on the shader ALUs
    m4_s = prepare("llama-2-7b", "apple-m4", runtime="llama.cpp", **kw).evaluate()["prefill_compute_s"]
    assert m4_s == pytest.approx(((LAYERS + HEAD) * DQ + ATTN) / (c * 3.76e12), rel=1e-9)
    # at c = 0.7683 that is about 2.0 x faster GEMMs, not the 4 x of Apple's peak
    assert 1.9 < m4_s / expect < 2.05


@given(st.floats(1e9, 1e15), st.floats(0.05, 1.0), st.floats(0.0, 0.5), st.floats(1.0, 64.0))
def test_matrix_units_law(shader_peak, c, dq, speedup):
    C = c * shader_peak
    # units as fast as the ALUs give the shader rate back; faster ones are never slower, never beat
    # the units' own peak (on 1 + dq FLOPs of work per FLOP multiplied), nor the bound of infinitely
    # fast units, where only the staging (1 + dq - c) / C remains
    assert on_matrix_units(C, shader_peak, c, dq) == pytest.approx(C, rel=1e-9)
    r = on_matrix_units(C, speedup * shader_peak, c, dq)
    assert C * (1 - 1e-12) <= r <= speedup * shader_peak * (1 + dq) * (1 + 1e-12)
    assert r * (1 + dq - c) <= (1 + dq) * C * (1 + 1e-12)


def test_a_shader_rate_above_the_peak_is_refused():
    with pytest.raises(MemboundError, match="shader_flops"):
        mb.load_hardware("apple-m5").with_overrides(shader_flops={"fp16": 2e13})
    with pytest.raises(MemboundError, match="shader_flops"):
        mb.load_hardware("apple-m5").with_overrides(shader_flops={"fp8": 1e12})
