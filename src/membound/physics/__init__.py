"""The physics layer: bytes over bandwidth and FLOPs over compute. roofline, the one engine step (core),
dataflow chips, parallel layouts, quantization, speculative decoding, results, `estimate`, chip counts
(capacity) and the reading of a speed curve (fares). Imports the catalogue and below. See
docs/architecture.md.
"""
