"""The installed package (a built wheel) carries the bundled profiles, presets and runtimes."""
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _build(kind: str, out: Path) -> Path:
    """`python -m build --wheel|--sdist` of this checkout into `out`; the artifact's path."""
    pytest.importorskip("build")
    run = subprocess.run([sys.executable, "-m", "build", f"--{kind}", "--outdir", str(out), str(ROOT)],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    return next(out.glob("membound-*.whl" if kind == "wheel" else "membound-*.tar.gz"))


@pytest.mark.skipif(not (ROOT / "pyproject.toml").exists(), reason="needs the source tree")
def test_wheel_contains_data(tmp_path):
    wheel = _build("wheel", tmp_path)
    names = zipfile.ZipFile(wheel).namelist()
    profiles = {Path(n).stem for n in names if n.startswith("membound/hardware_profiles/") and n.endswith(".yaml")}
    bundled = {p.stem for p in (ROOT / "hardware_profiles").glob("*.yaml")}
    assert profiles == bundled and "h100-sxm" in profiles
    assert any(n.startswith("membound/data/models/") and n.endswith("llama-3.1-8b.yaml") for n in names)
    assert any(n.startswith("membound/data/runtimes/") for n in names)
    assert "membound/py.typed" in names
    assert {f"membound/present/app/static/{f}" for f in ("index.html", "app.js", "app.css")} <= set(names)


@pytest.mark.skipif(not (ROOT / "pyproject.toml").exists(), reason="needs the source tree")
def test_sdist_carries_examples_and_passes_its_own_tests(tmp_path):
    import os
    import tarfile
    sdist = _build("sdist", tmp_path)
    with tarfile.open(sdist) as tar:
        tar.extractall(tmp_path / "x", filter="data")
    top = next((tmp_path / "x").iterdir())
    for needed in ("examples/compare_70b.py", "examples/tour.ipynb", "scripts/readme_tables.py", "LICENSE",
                   "README.md", "src/membound/py.typed", "tests/conftest.py"):
        assert (top / needed).exists(), needed
    # a subset of its own tests, importing the unpacked source (not this checkout)
    env = {**os.environ, "PYTHONPATH": str(top / "src")}
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "tests/test_readme.py",
                          "tests/test_examples.py", "-k", "readme or compare_70b"],
                         cwd=top, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert " passed" in run.stdout and "skipped" not in run.stdout.splitlines()[-1]
