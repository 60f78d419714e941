"""The fidelity layer: how the predictions meet measurements. The reference data (reference), the committed
fit/select/report split, the one fitter, the runtimes' calibration, and one validation report per data set
(validate: the static tables; serve_validate: InferenceMAX; mlperf_validate: MLPerf Inference, its rows read
as served configurations by mlperf_rows). Imports planning and below; nothing below imports it. See
docs/architecture.md.

    import membound as mb
    ref = mb.fidelity.load_reference()           # the shipped measurements, as Scenarios
    mb.fidelity.predict(ref.scenarios[0])        # what membound predicts for one of them
    mb.fidelity.validation_report()              # every row, held out as the committed split says
"""
from typing import Any

from .reference import Scenario, load_reference, predict, reference_dir

__all__ = ["Scenario", "load_reference", "predict", "reference_dir", "validation_report"]


def __getattr__(name: str) -> Any:
    """`validation_report` is bound on first use: importing membound.fidelity.validate (and through it calibrate
    and vendors) with the package would make `python -m membound.fidelity.validate` warn that the module was
    imported before it ran."""
    if name == "validation_report":
        from .validate import validation_report   # on first use: runpy (python -m ...validate) must find it unimported
        return validation_report
    raise AttributeError(f"module 'membound.fidelity' has no attribute {name!r}")
