"""Test setup: `import membound` from a checkout without installing it, and Hypothesis profiles.

- local (default): random examples (to keep finding bugs), each test's own example count.
- `ci` (CI=true): a fixed derandomized sequence, so a submission's result does not depend on the draw.
- `thorough` (HYPOTHESIS_PROFILE=thorough): a hunt for latent law violations before CI draws them:
  every property test runs THOROUGH_FACTOR (default 10; env HYPOTHESIS_THOROUGH_FACTOR) times its
  own `max_examples`. Combine with `--hypothesis-seed=N` for several draws, or with CI=true for
  CI's derandomized sequence, lengthened. Slow: run one file at a time.

No profile has a deadline: a per-example time limit is a timed assertion, and on a loaded 2-core
CI machine a 200 ms default fails tests that are right (speed lives in benchmarks/). Every profile
prints the reproduce blob of a failure."""
import importlib.util
import os
import sys
from pathlib import Path

import pytest
from hypothesis import settings

if importlib.util.find_spec("membound") is None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

CI = os.environ.get("CI", "").lower() == "true"
THOROUGH = os.environ.get("HYPOTHESIS_PROFILE", "") == "thorough"
THOROUGH_FACTOR = int(os.environ.get("HYPOTHESIS_THOROUGH_FACTOR", "10"))

settings.register_profile("local", deadline=None, print_blob=True)
settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
settings.register_profile("thorough", derandomize=CI, deadline=None, print_blob=True)
settings.load_profile("thorough" if THOROUGH else "ci" if CI else "local")


def _scale_examples(item: pytest.Item) -> None:
    """A test's own `@settings(max_examples=N)` outranks any profile, so the thorough profile scales
    it here: the settings Hypothesis reads when the test runs become N * THOROUGH_FACTOR (N = 100,
    Hypothesis's default, for a test without its own count)."""
    test = getattr(item, "obj", None)
    test = getattr(test, "__func__", test)
    if not getattr(test, "is_hypothesis_test", False):
        return
    own = getattr(test, "_hypothesis_internal_use_settings", None)
    if own is None:
        raise RuntimeError(f"{item.nodeid}: Hypothesis no longer keeps a test's settings where "
                           "conftest.py scales them; the thorough profile cannot run")
    if not getattr(test, "_thorough_scaled", False):
        test._hypothesis_internal_use_settings = settings(
            own, max_examples=own.max_examples * THOROUGH_FACTOR)
        test._thorough_scaled = True  # once: a parametrized test is one function, several items


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if THOROUGH:
        for item in items:
            _scale_examples(item)
