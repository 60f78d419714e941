"""The documentation site builds with warnings as errors (mkdocs.yml; CI runs the same build)."""
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(not (ROOT / "mkdocs.yml").exists(), reason="needs the source tree")
def test_docs_build_strict(tmp_path):
    pytest.importorskip("mkdocstrings", reason="the docs build needs membound[docs] (mkdocs-material, mkdocstrings)")
    pytest.importorskip("material", reason="the docs build needs membound[docs] (mkdocs-material, mkdocstrings)")
    p = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                       cwd=ROOT, capture_output=True, text=True, timeout=300,
                       env={**__import__("os").environ, "NO_MKDOCS_2_WARNING": "1"})
    assert p.returncode == 0, p.stderr[-3000:]
    # every guide is a page of the site, and the API reference rendered the docstrings
    for page in sorted((ROOT / "docs").glob("*.md")):
        name = "" if page.stem == "index" else page.stem + "/"
        assert (tmp_path / "site" / name / "index.html").exists(), page.name
    estimate = (tmp_path / "site" / "api" / "predict" / "index.html").read_text()
    assert "Predict decode speed, TTFT" in estimate      # estimate()'s docstring, first line
    # the project's own words for its sources stay out of the rendered pages, docstrings included
    for html in (tmp_path / "site").rglob("*.html"):
        text = html.read_text().lower()
        assert not [w for w in ("seed article", "seed claim", "the seed's", "the seeds'") if w in text], html
