"""membound: how fast a large language model runs on given hardware, from bytes and FLOPs.

    import membound as mb
    r = mb.estimate("llama-3.1-8b", "h100-sxm", batch=1, prompt_tokens=2048, output_tokens=256)
    print(r)

Which call answers which question (docs/questions.md has the full map; help(mb.NAME) for one):

    how fast is model X on chip Y?                  estimate(X, Y)
    which of several devices, side by side?         compare(X, ["h100-sxm:8", "h200"])
    the most any software could get                 bandwidth_ceiling(X, Y)
    how many chips hold it?                         min_chips(X, Y); layout_for(X, Y, n)
    what do N concurrent users get?                 serve(X, Y, concurrency=N); serve_curve(...)
    how many GPUs for N users at a target, cheapest? plan(X, Workload(...), SLO(...))
    a grid of millions of configurations            sweep(...); iter_sweep(...); pareto_front(x, y)
    what do quantization, batching, drafting buy?   explain_levers, quantization_speedup, speculative_speedup,
                                                    best_gamma, batch_curve, bus_fare, fast_mode
    what a speed means for a product                agent_loop_s, reasoning_time_s, thinking_tokens, voice_turn
    how far off are the predictions?                validation_report(); load_reference(); predict(row)
    the catalogue                                   list_models, load_model, list_hardware, load_hardware,
                                                    list_runtimes, load_runtime, list_dtypes, resolve_name

Every bad input raises a subclass of MemboundError naming the field, the value and what was expected.
"""
from .errors import DoesNotFitError, InvalidInputError, MemboundError, ProfileError, UnknownNameError
from .catalog.names import resolve_name, suggest_names
from .catalog.dtypes import DType, get_dtype, list_dtypes, register_dtype
from .catalog.hardware import Hardware, add_hardware_dir, list_hardware, load_hardware
from .catalog.model import Model, list_models, load_model
from .catalog.runtime import Runtime, list_runtimes, load_runtime
from .physics.parallel import Parallel
from .physics.quantization import Quantization
from .physics.speculative import SpeculativeDecoding, expected_tokens_per_round
from .physics.result import Memory, Result
from .physics.estimate import bandwidth_ceiling, estimate
from .physics.capacity import layout_for, min_chips
from .planning.compare import CompareResult, compare
from .present import plots   # matplotlib is imported only when a plot is drawn
from .physics.speculative import head_cost, head_param_count, mtp, mtp_module, predicted_speedup
from .planning.batching import BatchCurve, BusFare, FastMode, batch_curve, bus_fare, fast_mode, max_batch, ridge_batch
from .planning.levers import LeverReport, QuantSpeedup, best_gamma, explain_levers, quantization_speedup, speculative_speedup
from .planning.sweep import iter_sweep, pareto_front, sweep
from .planning.planner import SLO, PlanResult, Workload, plan
from .planning.rate_search import MaxRate, max_rate
from .serving import Fixed, Samples, Scheduler, ServeCurve, ServeResult, Uniform, serve, serve_curve
from .serving.disagg import Pool, serve_disaggregated
from .planning.product import VoiceTurn, agent_loop_s, reasoning_time_s, thinking_tokens, voice_turn

from .fidelity.reference import Scenario, load_reference, predict, reference_dir
from .present.explore import explore   # ipywidgets is imported only when the explorer is built
from .base import defaults

__version__ = "0.1.0"


def __getattr__(name: str):
    """`validation_report` is imported on first use: importing membound.validate (and through
    it calibrate and vendors) with the package would make `python -m membound.fidelity.validate` warn that
    the module was already imported before it ran."""
    if name == "validation_report":
        from .fidelity.validate import validation_report   # on first use: runpy (python -m ...validate) must find it unimported
        return validation_report
    raise AttributeError(f"module 'membound' has no attribute {name!r}")

__all__ = [
    # predict
    "estimate", "compare", "bandwidth_ceiling", "sweep", "iter_sweep", "pareto_front", "plan", "serve", "serve_curve",
    "serve_disaggregated", "explore",
    # results
    "Result", "Memory", "CompareResult", "PlanResult", "ServeResult", "ServeCurve", "BatchCurve", "BusFare", "FastMode",
    "LeverReport", "QuantSpeedup", "VoiceTurn",
    # inputs
    "Model", "Hardware", "Runtime", "DType", "Parallel", "Quantization", "SpeculativeDecoding", "Workload", "SLO", "MaxRate",
    "Scheduler", "Fixed", "Uniform", "Samples", "Pool",
    # catalogues and names
    "load_model", "list_models", "load_hardware", "list_hardware", "add_hardware_dir", "load_runtime",
    "list_runtimes", "get_dtype", "list_dtypes", "register_dtype", "resolve_name", "suggest_names",
    # chips and layouts
    "min_chips", "layout_for",
    # levers and batching
    "batch_curve", "bus_fare", "fast_mode", "max_batch", "max_rate", "ridge_batch", "explain_levers", "quantization_speedup",
    "speculative_speedup", "best_gamma", "expected_tokens_per_round", "head_cost", "head_param_count",
    "predicted_speedup", "mtp", "mtp_module",
    # products
    "agent_loop_s", "reasoning_time_s", "thinking_tokens", "voice_turn",
    # reference data
    "load_reference", "reference_dir", "validation_report", "predict", "Scenario",
    # errors
    "MemboundError", "InvalidInputError", "UnknownNameError", "ProfileError", "DoesNotFitError",
    # modules
    "plots", "defaults",
    "__version__",
]
