"""The base layer: what every other layer may use, importing nothing of membound but `membound.errors`.

defaults (the default workload), display (text and HTML tables every result prints with), safeio (file
reading and writing that refuses bad input), progress (progress bars), workbudget (seconds of work a
long computation may take). See docs/architecture.md.
"""
