"""Measure your own endpoint: stream requests to an OpenAI-compatible server, report TTFT and
decode speed (medians, tails, aggregate), compare with `estimate()` and fit a Runtime.

    from membound import bench
    res = bench.run("http://127.0.0.1:8000", concurrency=[1, 4], repeats=3)
    print(res)                                   # medians, p90, prefill cost, failures
    rows = bench.compare(res, "llama-3.1-8b", "rtx-4090", weight_dtype="q4_k_m")
    cal = bench.fit_runtime(res, "llama-3.1-8b", "rtx-4090", weight_dtype="q4_k_m")
    mb.estimate("llama-3.1-8b", "rtx-4090", weight_dtype="q4_k_m", runtime=cal.runtime)

Needs only the standard library (http.client); not imported by `import membound`.
"""
from .client import Sample, count_prompt_tokens, decode_rate, iter_sse, list_models, stream_chat
from .compare import Calibration, Comparison, Point, compare, fit_runtime, load_runtime_file, points_from
from .harness import BenchResult, LevelStats, Round, level_stats, percentile, run
from .localcpu import local_cpu_hardware, measure_copy_bandwidth
from .prompts import RATE_LIMITER, Prompt, documentation_text, load_prompts, long_context
from .report import bench_text, calibration_text, comparison_text

__all__ = ["BenchResult", "Calibration", "Comparison", "LevelStats", "Point", "Prompt", "RATE_LIMITER",
           "Round", "Sample", "bench_text", "count_prompt_tokens", "calibration_text", "compare", "comparison_text",
           "decode_rate",
           "documentation_text", "fit_runtime", "iter_sse", "level_stats", "list_models", "load_prompts",
           "load_runtime_file", "local_cpu_hardware", "long_context", "measure_copy_bandwidth", "percentile",
           "points_from", "run", "stream_chat"]
