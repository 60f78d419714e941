"""Test setup: `import membound` from a checkout without installing it, and Hypothesis profiles:
random examples locally (to keep finding bugs), a fixed derandomized sequence in CI (CI=true)
so a submission's result does not depend on the draw."""
import importlib.util
import os
import sys
from pathlib import Path

from hypothesis import settings

if importlib.util.find_spec("membound") is None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
if os.environ.get("CI", "").lower() == "true":
    settings.load_profile("ci")
