"""membound: how fast a large language model runs on given hardware, from bytes and FLOPs.

    import membound as mb
    r = mb.estimate("llama-3.1-8b", "h100-sxm", batch=1, prompt_tokens=2048, output_tokens=256)
    print(r)

The index (docs/questions.md maps questions to calls; help(mb.NAME) for one; docs/architecture.md the layers):

    predict     estimate(X, Y)                  how fast is model X on chip Y (TTFT, tok/s, memory, cost)
                compare(X, ["h100-sxm:8", "h200"])  several devices side by side
                bandwidth_ceiling(X, Y)         the most any software could get
                min_chips(X, Y); layout_for(X, Y, n)  how many chips hold it, and how to split it
                sweep(...)                      a grid of millions of configurations as one table
                explore(...)                    the notebook explorer
    serve       serve(X, Y, concurrency=N)      what N concurrent users get from one engine
                serve_curve(...); serve_disaggregated(...); max_rate(...)
    plan        plan(X, Workload(...), SLO(...))  how many GPUs for N users at a target, cheapest first
    levers      explain_levers, quantization_speedup, speculative_speedup, best_gamma, batch_curve, mtp
    inputs      Model, Hardware, Runtime, Parallel, Quantization, SpeculativeDecoding, Workload, SLO
    results     Result (estimate), ServeResult (serve); every other result type prints itself
    catalogue   list_models, load_model, list_hardware, load_hardware, add_hardware_dir,
                list_runtimes, load_runtime, resolve_name
    errors      MemboundError and its subclasses InvalidInputError, UnknownNameError, ProfileError,
                DoesNotFitError: every bad input names the field, the value and what was expected
    modules     plots (matplotlib figures), serving (schedulers, length distributions: Fixed, Uniform,
                Samples, Scheduler, Pool), fidelity (the reference data and the validation reports:
                load_reference, predict, validation_report)

Everything else is importable from its layer: membound.catalog (dtypes, names), membound.physics,
membound.serving, membound.planning (sweep, batching, levers, product figures: agent_loop_s, ...),
membound.fidelity, membound.present.
"""
from .errors import DoesNotFitError, InvalidInputError, MemboundError, ProfileError, UnknownNameError
from .catalog.names import resolve_name
from .catalog.hardware import Hardware, add_hardware_dir, list_hardware, load_hardware
from .catalog.model import Model, list_models, load_model
from .catalog.runtime import Runtime, list_runtimes, load_runtime
from .physics.parallel import Parallel
from .physics.quantization import Quantization
from .physics.speculative import SpeculativeDecoding, mtp
from .physics.result import Result
from .physics.estimate import bandwidth_ceiling, estimate
from .physics.capacity import layout_for, min_chips
from . import serving
from .serving import ServeResult, serve, serve_curve
from .serving.disagg import serve_disaggregated
from .planning.compare import compare
from .planning.batching import batch_curve
from .planning.levers import best_gamma, explain_levers, quantization_speedup, speculative_speedup
from .planning.sweep import sweep
from .planning.planner import SLO, Workload, plan
from .planning.rate_search import max_rate
from . import fidelity
from .present import plots   # matplotlib is imported only when a plot is drawn
from .present.explore import explore   # ipywidgets is imported only when the explorer is built

__version__ = "0.1.0"

__all__ = [
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
    # modules
    "plots", "serving", "fidelity",
    "__version__",
]
