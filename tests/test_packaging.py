"""The installed package (a built wheel) carries the bundled profiles, presets and runtimes."""
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(not (ROOT / "pyproject.toml").exists(), reason="needs the source tree")
def test_wheel_contains_data(tmp_path):
    pytest.importorskip("build")
    out = subprocess.run([sys.executable, "-m", "build", "--wheel", "--outdir", str(tmp_path), str(ROOT)],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    wheel = next(tmp_path.glob("membound-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    profiles = {Path(n).stem for n in names if n.startswith("membound/hardware_profiles/") and n.endswith(".yaml")}
    bundled = {p.stem for p in (ROOT / "hardware_profiles").glob("*.yaml")}
    assert profiles == bundled and "h100-sxm" in profiles
    assert any(n.startswith("membound/data/models/") and n.endswith("llama-3.1-8b.yaml") for n in names)
    assert any(n.startswith("membound/data/runtimes/") for n in names)
    assert "membound/py.typed" in names
    assert {"membound/app/static/index.html", "membound/app/static/app.js", "membound/app/static/app.css"} <= set(names)
