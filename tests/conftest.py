"""Make `import membound` work from a checkout without installing the package."""
import importlib.util
import sys
from pathlib import Path

if importlib.util.find_spec("membound") is None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
