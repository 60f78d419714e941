"""The fidelity layer: how the predictions meet measurements. The reference data (reference), the committed
fit/select/report split, the one fitter, the runtimes' calibration, and one validation report per data set
(validate: the static tables; serve_validate: InferenceMAX; mlperf_validate: MLPerf Inference). Imports
planning and below; nothing below imports it. See docs/architecture.md.
"""
