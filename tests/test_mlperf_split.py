"""The committed roles of the MLPerf accelerator families (data/mlperf_split.csv, membound.fidelity.split.mlperf_role):
each family takes its base chip's committed role, the Hopper families (one GH100 die) fit."""
from membound.fidelity import split

# by hand from data/split.csv: b200 select, gb200 report, mi300x select, rtx-pro-6000-blackwell report;
# l40s and arc-pro-b60 are not recorded there and the sha256 rule makes them report
BASE = {"B200": "b200", "GB200": "gb200", "MI300X": "mi300x", "RTX-PRO-6000": "rtx-pro-6000-blackwell",
        "L40S": "l40s", "Intel-Arc-Pro-B60": "arc-pro-b60"}
HOPPER = ("H100", "H200", "GH200")


def test_non_hopper_families_take_their_base_chips_role():
    for family, chip in BASE.items():
        assert split.mlperf_role(family) == split.role("chip", chip), family


def test_roles_as_written_by_hand():
    assert [split.mlperf_role(f) for f in ("B200", "MI300X")] == ["select", "select"]
    assert [split.mlperf_role(f) for f in ("GB200", "RTX-PRO-6000", "L40S", "Intel-Arc-Pro-B60")] == ["report"] * 4
    assert [split.mlperf_role(f) for f in HOPPER] == ["fit"] * 3


def test_an_unlisted_family_is_held_out_as_report():
    assert split.mlperf_role("Vera-Rubin") == "report"
