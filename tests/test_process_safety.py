"""Everything that crosses a process pickles and compares equal; caches are safe under threads."""
import pickle
from concurrent.futures import ThreadPoolExecutor

import pytest

import membound as mb


def _roundtrip(x):
    return pickle.loads(pickle.dumps(x))


@pytest.mark.parametrize("obj", [
    lambda: mb.load_model("deepseek-v3"), lambda: mb.load_model("gemma-3-27b"),
    lambda: mb.load_hardware("sambanova-sn40l"), lambda: mb.load_hardware("h100-sxm"),
    lambda: mb.load_runtime("vllm"), lambda: mb.Parallel(tp=2, pp=2),
    lambda: mb.SpeculativeDecoding(draft="llama-3.2-1b", gamma=4, acceptance_rate=0.7),
    lambda: mb.estimate("llama-3.1-70b", "h200", n_chips=2, batch=8, prompt_tokens=512, output_tokens=64),
    lambda: mb.InvalidInputError("batch", -1, "an integer >= 1"),
    lambda: mb.UnknownNameError("model", "x", ["a", "b"]),
    lambda: mb.ProfileError("f.yaml", "memory", "bad"),
    lambda: mb.DoesNotFitError(2e9, 1e9, 2, "detail"),
])
def test_pickle_roundtrip_equal(obj):
    x = obj()
    y = _roundtrip(x)
    assert y == x
    if isinstance(x, Exception):
        assert str(y) == str(x) and type(y) is type(x)


def test_estimate_is_thread_safe_and_deterministic():
    mb.catalog.hardware._catalogue.cache_clear()
    mb.catalog.hardware._load_cached.cache_clear()
    args = [("llama-3.1-8b", "h100-sxm", b) for b in (1, 2, 4, 8)] * 25

    def run(a):
        m, h, b = a
        return mb.estimate(m, h, batch=b, prompt_tokens=256, output_tokens=32, runtime="vllm").decode_tok_s_total

    with ThreadPoolExecutor(8) as pool:
        threaded = list(pool.map(run, args))
    assert threaded == [run(a) for a in args]
