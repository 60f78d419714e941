"""Every example script and notebook runs to the end (scripts as subprocesses, notebooks with
nbclient on the python3 kernel)."""
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
SCRIPTS = sorted(EXAMPLES.glob("*.py"))
NOTEBOOKS = sorted(EXAMPLES.glob("*.ipynb"))
# a hang guard, not a speed bound (speed lives in benchmarks/): each script is 1.2-2.7 s of CPU, yet
# 16-36 s of wall time under load 18 on 2 cores (imports waiting on a shared disk and CPU)
HANG_S = 600


def test_there_are_examples():
    assert SCRIPTS and NOTEBOOKS


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_script_runs(script, tmp_path):
    p = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True,
                       timeout=HANG_S, env={**__import__("os").environ, "MPLBACKEND": "Agg"})
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.strip()


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs(notebook, tmp_path):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    nb = nbformat.read(notebook, as_version=4)
    nbclient.NotebookClient(nb, timeout=HANG_S, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.output_type == "error"]
    assert not errors
