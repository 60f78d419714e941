"""What `serve()` reports: `ServeResult` and its quantiles."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields

from .scheduler import Scheduler
from ..base.display import text_table, html_table


@dataclass(frozen=True, slots=True)
class Quantiles:
    """Seconds: median, 90th and 99th percentile, and the mean."""

    median: float
    p90: float
    p99: float
    mean: float


@dataclass(frozen=True, slots=True)
class ServeResult:
    """A served workload's steady state. Times in seconds, speeds in tokens/s, money in USD."""

    model: str
    hardware: str
    runtime: str
    engine: str                    # solver | simulate
    n_chips: int
    parallel: str
    concurrency: float | None      # closed-loop clients
    arrival_rate: float | None     # requests per second (open loop)
    prompt_tokens: float           # means
    output_tokens: float
    weight_dtype: str
    kv_dtype: str
    activation_dtype: str
    ttft: Quantiles                # time to first token, queueing included
    tpot: Quantiles                # per request (e2e - ttft) / (output - 1)
    itl: Quantiles                 # gaps between a request's tokens
    e2e: Quantiles
    output_tok_s: float            # output tokens per second, all users
    output_tok_s_per_chip: float
    tok_s_per_user: float          # 1 / median TPOT (InferenceMAX's interactivity)
    requests_per_s: float
    mean_running: float            # decoding sequences per step, on average
    kv_occupancy: float            # share of the KV cache in use, on average
    queueing_s: float              # mean wait before a request's first prefill chunk
    preemptions: int
    bound: str                     # what sets the mean step: memory | compute | ...
    cost_per_million_output_tokens_usd: float | None
    max_running: int               # the cap on running sequences (scheduler or KV cache)
    scheduler: Scheduler = field(default_factory=Scheduler)
    calibration: str = ""          # where the runtime's constants come from: fitted on which rows, assumed

    def to_dict(self) -> dict:
        d = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, Quantiles):
                for k, x in asdict(v).items():
                    d[f"{f.name}_{k}_s"] = x
            elif isinstance(v, Scheduler):
                for k, x in asdict(v).items():
                    d[f"scheduler_{k}"] = x
            else:
                d[f.name] = v
        return d

    def to_pandas(self):
        """A one-row pandas DataFrame (needs pandas)."""
        import pandas as pd   # pandas: deferred, about a second to import; only tables need it
        return pd.DataFrame([self.to_dict()])

    def rows(self) -> list[tuple[str, str]]:
        load = f"{self.concurrency:g} clients (closed loop)" if self.concurrency is not None \
            else f"{self.arrival_rate:g} requests/s (Poisson)"

        def q(x: Quantiles) -> str:
            return f"median {_secs(x.median)}, p90 {_secs(x.p90)}, p99 {_secs(x.p99)}"
        cost = self.cost_per_million_output_tokens_usd
        return [
            ("model", self.model), ("hardware", f"{self.n_chips} x {self.hardware} ({self.parallel})"),
            ("runtime", f"{self.runtime} ({self.engine})"),
            ("workload", f"{load}, prompt {self.prompt_tokens:g}, output {self.output_tokens:g} tokens (means)"),
            ("dtypes", f"weights {self.weight_dtype}, KV {self.kv_dtype}, activations {self.activation_dtype}"),
            ("TTFT", q(self.ttft)), ("TPOT", q(self.tpot)), ("ITL", q(self.itl)), ("end to end", q(self.e2e)),
            ("per user", f"{self.tok_s_per_user:,.1f} tok/s"),
            ("output", f"{self.output_tok_s:,.0f} tok/s, {self.output_tok_s_per_chip:,.0f} tok/s per chip"),
            ("running batch", f"{self.mean_running:.1f} (cap {self.max_running}), KV {100 * self.kv_occupancy:.0f}% full"),
            ("queueing", f"{_secs(self.queueing_s)}, {self.preemptions} preemptions"),
            ("bound", self.bound),
            ("cost", f"${cost:.3g} per million output tokens" if cost is not None else "no price (pass --price)"),
            ("calibration", self.calibration),
        ]

    def __str__(self) -> str:
        return text_table(self.rows())

    def _repr_html_(self) -> str:
        return html_table(self.rows())


def _secs(x: float) -> str:
    return f"{x:.3g} s" if x >= 1 else f"{x * 1e3:.3g} ms"
