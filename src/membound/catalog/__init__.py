"""The catalogue layer: what can be named. dtypes, models, hardware profiles, runtimes (engines and their
fitted constants, as files), the name resolver and the bundled data files. Imports only `membound.base`
and `membound.errors`. See docs/architecture.md.
"""
from . import dtypes, hardware, model, runtime  # noqa: E402,F401 - each registers its names with the resolver (names.register_kind)
