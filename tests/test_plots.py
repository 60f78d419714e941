"""Each picture renders to a PNG (Agg backend) with the axes, scales and labels it promises."""
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

import membound as mb  # noqa: E402
from membound import plots  # noqa: E402


def _save(ax, path):
    ax.figure.savefig(path, dpi=60)
    plt.close(ax.figure)
    assert path.stat().st_size > 5000


def test_roofline(tmp_path):
    ax = plots.roofline("h100-sxm", "llama-3.1-8b", batches=(1, 8, 64))
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    roof = ax.lines[0]
    # the flat roof is the bf16 peak: 989e12 FLOP/s = 989 TFLOP/s; the ridge at 989e12 / 3.35e12 = 295 FLOP/B
    assert roof.get_ydata().max() == pytest.approx(989.0)
    decode = [ln for ln in ax.lines if "decode" in str(ln.get_label())][0]
    x = decode.get_xdata()
    # batch 1 decode of an 8B bf16 model: ~2 FLOPs per 2 bytes of weight -> intensity ~1 FLOP/B
    assert 0.5 < x[0] < 2 and np.all(np.diff(x) > 0)
    assert "FLOP per byte" in ax.get_xlabel() and "TFLOP/s" in ax.get_ylabel()
    _save(ax, tmp_path / "roofline.png")


def test_context_curve_falls_with_context(tmp_path):
    ax = plots.context_curve("llama-3.1-8b", ["h100-sxm", "h200"], contexts=[1024, 8192, 65536])
    assert len(ax.lines) == 2 and "H100" in ax.get_legend().get_texts()[0].get_text()
    y = ax.lines[0].get_ydata()
    assert y[0] > y[-1] > 0                      # a longer KV cache streams more bytes per token
    _save(ax, tmp_path / "context.png")


def test_interactivity_trades_user_speed_for_throughput(tmp_path):
    ax = plots.interactivity("llama-3.1-8b", ["h100-sxm"], batches=[1, 8, 64], n_chips=1)
    x, y = ax.lines[0].get_xdata(), ax.lines[0].get_ydata()
    assert np.all(np.diff(x) < 0) and np.all(np.diff(y) > 0)
    _save(ax, tmp_path / "interactivity.png")


def test_memory_breakdown(tmp_path):
    r = mb.estimate("llama-3.1-8b", "h100-sxm", batch=4, prompt_tokens=4096, output_tokens=256)
    ax = plots.memory_breakdown([r, r])
    widths = [p.get_width() for p in ax.patches]
    # the weights bar: 8.03e9 params * 2 bytes = 16.1 GB
    assert widths[0] == pytest.approx(mb.load_model("llama-3.1-8b").total_params * 2 / 1e9)
    _save(ax, tmp_path / "memory.png")
    with pytest.raises(mb.InvalidInputError):
        plots.memory_breakdown([])


def test_validation(tmp_path):
    df = pd.DataFrame({"measured": [10.0, 100.0, 50.0], "predicted": [11.0, 90.0, 50.0],
                       "category": ["apple", "nvidia", "apple"]})
    ax = plots.validation(df)
    assert ax.get_xscale() == "log"
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "apple (2)" in labels and "nvidia (1)" in labels
    _save(ax, tmp_path / "validation.png")
    with pytest.raises(mb.InvalidInputError, match="column"):
        plots.validation(df, predicted="nope")
