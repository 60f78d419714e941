"""Progress bars: counts of the work itself, shown on a terminal (or forced), never when quiet."""
import io

import membound.base.progress as progress


def test_track_counts_each_item_and_reaches_the_total(monkeypatch):
    err = io.StringIO()
    monkeypatch.setattr(progress.sys, "stderr", err)
    out = []
    for x in progress.track(range(7), "work"):      # stderr is not a terminal: nothing shown
        out.append(x)
    assert out == list(range(7)) and err.getvalue() == ""
    with progress.bar(7, "work", force=True) as b:
        for _ in range(7):
            b.update(1)
    assert b.n == 7 and "7/7" in err.getvalue()
    before = err.getvalue()
    with progress.bar(7, "work", force=True, quiet=True) as b:
        b.update(7)
    assert err.getvalue() == before                   # quiet wins over force: nothing drawn
