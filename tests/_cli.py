"""The CLI run in this process (as `membound ARGS`), for tests that check what it prints."""
import io
from contextlib import redirect_stderr, redirect_stdout
from types import SimpleNamespace

from membound.present.cli import main


def run_cli(*args: str) -> SimpleNamespace:
    """Exit code, stdout and stderr of `membound ARGS`, without a subprocess."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            code = main(list(args))
        except SystemExit as e:
            code = e.code
    return SimpleNamespace(returncode=code, stdout=out.getvalue(), stderr=err.getvalue())
