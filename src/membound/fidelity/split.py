"""The committed split of the development data into fit, select and report groups (docs/architecture.md,
rules of honest fitting: three roles, fixed before looking).

A group is a chip (a hardware profile's name) or a source (a row id's prefix: apple, lcpp2, ...).
Its role is decided by its name alone, never by an error:

    u = int(sha256("<kind>:<name>").hexdigest()[:8], 16) / 2**32
    role = "fit" if u < 1/3, "select" if u < 2/3, else "report"

- fit: its rows are fitted on in every refit and have no held-out figure;
- select: held out in turn (a cold refit without the group and without every report group) to
  choose model forms, frozen constants and switches: its figures are VALIDATION figures;
- report: held out in turn (a cold refit without the group, on everything else) and printed at the
  end; never tuned on. Its figures are the test.

The roles of the groups the shipped data holds are recorded in `data/split.csv` (its header
states this rule); `python -m membound.fidelity.validate --write-split` records groups added since (validate knows
the data sets; this module knows only the rule and the file), and a test
checks that every recorded role is the rule's. A group not recorded takes the rule's role.
"""
from __future__ import annotations

import argparse
import hashlib
from functools import lru_cache
from importlib import resources
from pathlib import Path

from ..errors import InvalidInputError

ROLES = ("fit", "select", "report")
KINDS = ("chip", "source")
HEADER = """\
# The fixed split of membound's development groups into fit, select and report roles (membound.split).
# A group is a chip (hardware profile name) or a source (row id prefix). Its role comes from its name
# alone, decided before any error was looked at:
#   u = int(sha256("<kind>:<name>").hexdigest()[:8], 16) / 2**32; fit if u < 1/3, select if u < 2/3, else report
# fit: fitted on in every refit, no held-out figure. select: held out in turn (cold refit without it and
# without every report group); used to choose model forms, frozen constants and switches (validation
# figures). report: held out in turn (cold refit without it), printed at the end, never tuned on.
# Rewrite with: python -m membound.fidelity.validate --write-split (adds new groups; a recorded role never changes).
kind,name,role
"""


def rule(kind: str, name: str) -> str:
    """The role the rule gives group `name` of `kind` ("chip" or "source")."""
    if kind not in KINDS:
        raise InvalidInputError("kind", kind, f"one of {KINDS}")
    u = int(hashlib.sha256(f"{kind}:{name}".encode()).hexdigest()[:8], 16) / 2**32
    return ROLES[min(int(3 * u), 2)]


def split_csv() -> Path:
    return Path(str(resources.files("membound") / "data" / "split.csv"))


@lru_cache(maxsize=1)
def recorded() -> dict:
    """{(kind, name): role} as recorded in data/split.csv."""
    path = split_csv()
    out: dict[tuple[str, str], str] = {}
    if not path.is_file():
        return out
    for ln in path.read_text().splitlines():
        if not ln.strip() or ln.startswith("#") or ln == "kind,name,role":
            continue
        kind, name, role = ln.split(",")
        if role not in ROLES:
            raise InvalidInputError("role", role, f"one of {ROLES} ({path}: {kind},{name})")
        out[(kind, name)] = role
    return out


def role(kind: str, name: str) -> str:
    """Group `name`'s role: as recorded, else the rule's."""
    return recorded().get((kind, name)) or rule(kind, name)


@lru_cache(maxsize=1)
def mlperf_roles() -> dict[str, str]:
    """{MLPerf accelerator family: role} as committed in data/mlperf_split.csv (its header states
    the rule: a family takes its base chip's committed role, the Hopper families fit)."""
    path = Path(str(resources.files("membound") / "data" / "mlperf_split.csv"))
    out: dict[str, str] = {}
    for ln in path.read_text().splitlines():
        if not ln.strip() or ln.startswith("#") or ln.startswith("family,"):
            continue
        family, _, r = ln.split(",")
        if r not in ROLES:
            raise InvalidInputError("role", r, f"one of {ROLES} ({path}: {ln})")
        out[family] = r
    return out


def mlperf_role(family: str) -> str:
    """The role of MLPerf accelerator family `family` (`mlperf_roles`); "report" where not listed."""
    return mlperf_roles().get(family, "report")


def write(groups) -> Path:
    """Record `groups` ({(kind, name)}) with their rule's roles, keeping every recorded one."""
    path = split_csv()
    allg = {**{g: rule(*g) for g in groups}, **recorded()}
    path.write_text(HEADER + "".join(f"{k},{n},{r}\n" for (k, n), r in sorted(allg.items())))
    recorded.cache_clear()
    return path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m membound.fidelity.split", description=__doc__.splitlines()[0])
    ap.parse_args(argv)   # the roles as recorded; validate --write-split records new groups
    for (k, n), r in sorted(recorded().items()):
        print(f"{k:7s} {n:32s} {r}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
