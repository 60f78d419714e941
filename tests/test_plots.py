"""Each picture renders to a PNG (Agg backend) with the axes, scales and labels it promises."""
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

import membound as mb  # noqa: E402
from membound.present import plots  # noqa: E402


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


def test_roofline_marks_batches_that_do_not_fit(tmp_path):
    # 8B bf16 at an 8,192-token context: KV 131,072 B per token -> batch 32 holds 32 x 8,193 x 131,072 =
    # 34.4 GB + 16.1 GB of weights = 50.5 GB (fits 85.5 GB); batch 512 needs 550 GB of KV: does not
    ax = plots.roofline("h100-sxm", "llama-3.1-8b", batches=(1, 32, 512), prompt_tokens=8192)
    unfit = [ln for ln in ax.lines if str(ln.get_label()).startswith("does not fit")]
    assert len(unfit) == 1 and len(unfit[0].get_xdata()) == 1
    assert unfit[0].get_markerfacecolor() == "none"
    notes = [t.get_text() for t in ax.texts]
    assert "B=512 (does not fit)" in notes and "B=1" in notes
    _save(ax, tmp_path / "roofline_unfit.png")


def test_validation_is_legible_at_20_categories(tmp_path):
    rng = np.random.default_rng(0)
    n = 20 * 5
    cats = [f"category {i:02d}" for i in range(20) for _ in range(5)]
    meas = 10 ** rng.uniform(-1, 5, n)              # six decades, as tok/s and ms rows together are
    df = pd.DataFrame({"measured": meas, "predicted": meas * rng.uniform(0.7, 1.4, n), "category": cats})
    ax = plots.validation(df)
    styles = {(tuple(c.get_facecolor()[0][:3]), c.get_paths()[0].vertices.tobytes()) for c in ax.collections
              if c.get_label().startswith("category")}
    assert len(styles) == 20                           # no two categories share colour and marker
    ax.figure.canvas.draw()
    for axis in (ax.xaxis, ax.yaxis):                 # one label per decade: at most 8 over 6-7 decades
        shown = [t.get_text() for t in axis.get_ticklabels() if t.get_text()]
        assert 3 <= len(shown) <= 9, shown
    legend = ax.get_legend()
    assert legend.get_bbox_to_anchor().x0 > ax.get_window_extent().x1 - 1   # outside the data
    _save(ax, tmp_path / "validation20.png")
