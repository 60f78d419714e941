"""The public surface (__all__, pinned), Jupyter reprs of every result type, equality that never raises."""
import types

import numpy as np
import pytest

import membound as mb
import membound.planning.product

PUBLIC = {
    # predict, serve, plan
    "estimate", "compare", "bandwidth_ceiling", "min_chips", "layout_for", "sweep", "explore",
    "serve", "serve_curve", "serve_disaggregated", "max_rate", "plan",
    # levers
    "explain_levers", "quantization_speedup", "speculative_speedup", "best_gamma", "batch_curve", "mtp",
    # inputs and results
    "Model", "Hardware", "Runtime", "Parallel", "Quantization", "SpeculativeDecoding", "Workload", "SLO",
    "Result", "ServeResult",
    # the catalogue
    "load_model", "list_models", "load_hardware", "list_hardware", "add_hardware_dir", "load_runtime",
    "list_runtimes", "resolve_name",
    # errors
    "MemboundError", "InvalidInputError", "UnknownNameError", "ProfileError", "DoesNotFitError",
    # modules: plots, the serving knobs (Fixed, Uniform, Samples, Scheduler, Pool), validation
    "plots", "serving", "fidelity",
    "__version__",
}


def test_all_is_the_pinned_public_surface():
    assert set(mb.__all__) == PUBLIC and len(mb.__all__) == len(PUBLIC)
    assert len(PUBLIC) <= 45                                          # issue 30: a curated surface
    for name in mb.__all__:
        assert hasattr(mb, name), name
    # nothing public outside __all__ but submodules
    extra = {k for k, v in vars(mb).items() if not k.startswith("_") and not isinstance(v, types.ModuleType)}
    assert extra <= PUBLIC, extra - PUBLIC


def _results():
    kw = dict(prompt_tokens=512, output_tokens=64)
    return {
        "Result": mb.estimate("llama-3.1-8b", "h100-sxm", **kw),
        "CompareResult": mb.compare("llama-3.1-8b", ["h100-sxm", "h200"], **kw),
        "BatchCurve": mb.batch_curve("llama-3.1-8b", "h100-sxm", batches=(1, 8, 64), **kw),
        "BusFare": mb.planning.batching.bus_fare("llama-3.1-8b", "h100-sxm", batch=1, full_batch=64, **kw),
        "FastMode": mb.planning.batching.fast_mode("llama-3.1-8b", "h100-sxm", batches=range(1, 65), **kw),
        "LeverReport": mb.explain_levers("llama-3.1-8b", "h100-sxm", batch=16, weight_dtype="int4", **kw),
        "QuantSpeedup": mb.quantization_speedup("llama-3.1-8b", "h100-sxm", batches=(1, 16)),
        "VoiceTurn": mb.planning.product.voice_turn(0.3, other_s=0.2),
        "PlanResult": mb.plan("llama-3.1-8b", mb.Workload(concurrent_users=50, prompt_tokens=512, output_tokens=64),
                              mb.SLO(ttft_p90_s=2.0), hardware=["h100-sxm"], batches=(1, 8, 64)),
    }


@pytest.fixture(scope="module")
def results():
    return _results()


@pytest.mark.parametrize("name", ["Result", "CompareResult", "BatchCurve", "BusFare", "FastMode", "LeverReport",
                                  "QuantSpeedup", "VoiceTurn", "PlanResult"])
def test_every_result_renders_as_text_and_html(results, name):
    r = results[name]
    assert type(r).__name__ == name
    text, page = str(r), r._repr_html_()
    assert text and not text.startswith("<") and not text.startswith(name + "(")
    assert page.startswith("<") and "</" in page


@pytest.mark.parametrize("name", ["Result", "CompareResult", "BatchCurve", "BusFare", "FastMode", "LeverReport",
                                  "QuantSpeedup", "VoiceTurn", "PlanResult"])
def test_equality_never_raises(results, name):
    r = results[name]
    again = _results()[name] if name in ("BatchCurve", "PlanResult", "QuantSpeedup") else r
    assert r == again and not (r != again)
    assert (r == 42) is False


def test_batch_curve_equality_sees_a_changed_array(results):
    from dataclasses import replace
    c = results["BatchCurve"]
    other = replace(c, total_tok_s=c.total_tok_s * np.array([1.0, 1.0, 1.001]))
    assert c != other


def test_voice_turn_text_by_hand():
    # 300 ms + 200 ms = 500 ms against the 250 ms gap given: 250 ms too slow
    assert str(mb.planning.product.voice_turn(0.3, other_s=0.2, gap_s=0.25)) == \
        "voice turn: TTFT 300 ms + other 200 ms = 500 ms against a 250 ms gap: 250 ms too slow"


@pytest.mark.parametrize("module", ["validate", "calibrate", "vendors"])
def test_python_dash_m_entry_points_run_without_a_double_import_warning(module):
    # `import membound` must not import these modules itself: runpy would then warn that
    # 'membound.<module>' was found in sys.modules before it ran (as it did for these three)
    import os
    import subprocess
    import sys
    env = {**os.environ, "PYTHONWARNINGS": "error::RuntimeWarning"}
    r = subprocess.run([sys.executable, "-m", f"membound.fidelity.{module}", "--help"], capture_output=True, text=True,
                       env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "RuntimeWarning" not in r.stderr


def test_validation_report_is_imported_on_first_use():
    assert callable(mb.fidelity.validation_report) and mb.fidelity.validation_report.__module__ == "membound.fidelity.validate"
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        mb.no_such_name  # noqa: B018


def test_the_served_package_is_not_shadowed_by_the_serve_function():
    # `import membound.X as m` binds the attribute membound.X: a package named like the public
    # function it exports would bind the function. The package is `serving`, the function `serve`.
    import membound.serving as serving
    assert isinstance(serving, types.ModuleType) and serving.serve is mb.serve
