"""One name per device (issue 31, Medium 5): a profile outside the bundled folder may not take a
bundled device's name, or a spelling of it, unless it says it replaces it (`replaces:`), and two
different devices sharing a name in one compare or sweep are refused. Also `power_w` in its
plausible range (Low: 0.7 is kilowatts)."""
import pytest
import yaml

import membound as mb
from membound.catalog import hardware
from membound.planning.sweep import iter_sweep
from membound.errors import InvalidInputError, ProfileError


@pytest.fixture
def fresh_dirs(monkeypatch):
    monkeypatch.setattr(hardware, "_user_dirs", {})
    monkeypatch.setattr(hardware, "_by_name", {})


def _l4(**changes) -> dict:
    data = yaml.safe_load((hardware.bundled_profiles_dir() / "l4.yaml").read_text())
    data.pop("aliases", None)
    return {**data, **changes}


def _write(path, data):
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


# the attack as written: fast.yaml with name: h100-sxm, loaded by path and registered in a folder
def test_a_file_taking_a_bundled_name_by_path_is_refused(tmp_path):
    f = _write(tmp_path / "fast.yaml", _l4(name="h100-sxm"))
    with pytest.raises(ProfileError, match=r"fast.yaml: field 'name': value 'h100-sxm' is the bundled device "
                                           r"'h100-sxm'.*replaces: h100-sxm"):
        mb.load_hardware(f)


def test_a_folder_holding_fast_yaml_named_h100_sxm_is_refused(tmp_path, fresh_dirs):
    _write(tmp_path / "fast.yaml", _l4(name="h100-sxm"))
    with pytest.raises(ProfileError, match="differs from the file name 'fast.yaml'"):
        mb.add_hardware_dir(tmp_path)
    assert mb.load_hardware("h100-sxm").display_name != mb.load_hardware("l4").display_name


@pytest.mark.parametrize("name", ["h100sxm", "nvidia-h100-80gb-hbm3"])   # spellings of the same device
def test_a_spelling_of_a_bundled_name_is_refused(tmp_path, name):
    with pytest.raises(ProfileError, match="is the bundled device 'h100-sxm'"):
        mb.load_hardware(_write(tmp_path / f"{name}.yaml", _l4(name=name)))


def test_a_profile_that_says_it_replaces_loads(tmp_path):
    hw = mb.load_hardware(_write(tmp_path / "fast.yaml", _l4(name="h100-sxm", replaces="h100-sxm")))
    assert (hw.name, hw.replaces) == ("h100-sxm", "h100-sxm")
    assert hw.bandwidth_bytes_s == mb.load_hardware("l4").bandwidth_bytes_s


def test_replaces_must_name_the_profile_itself(tmp_path):
    with pytest.raises(ProfileError, match="replaces: expected the profile's own name 'h100-sxm'"):
        mb.load_hardware(_write(tmp_path / "fast.yaml", _l4(name="h100-sxm", replaces="a100-80gb")))


def test_a_registered_profile_named_unlike_its_file_is_refused(tmp_path, fresh_dirs):
    _write(tmp_path / "my-chip.yaml", _l4(name="other-chip"))
    with pytest.raises(ProfileError, match="'other-chip' differs from the file name 'my-chip.yaml'"):
        mb.add_hardware_dir(tmp_path)


def test_a_fresh_name_needs_nothing(tmp_path):
    assert mb.load_hardware(_write(tmp_path / "my-chip.yaml", _l4(name="my-chip"))).name == "my-chip"


def test_two_devices_of_one_name_are_refused_in_one_run(tmp_path):
    mine = _write(tmp_path / "fast.yaml", _l4(name="h100-sxm", replaces="h100-sxm"))
    with pytest.raises(InvalidInputError, match="devices='h100-sxm' is invalid: expected devices with names"):
        mb.compare("llama-3.2-1b", [str(mine), "h100-sxm"])
    with pytest.raises(InvalidInputError, match="hardware='h100-sxm'"):
        list(iter_sweep("llama-3.2-1b", [str(mine), "h100-sxm"]))
    # one device twice (at two chip counts) is one device, not two
    assert len(mb.compare("llama-3.2-1b", ["h100-sxm:1", "h100-sxm:2"]).results) == 2


@pytest.mark.parametrize("watts, words", [
    (0.7, "power_w=0.7 is below 1 W: give watts \\(0.7 kW = 700 W\\)"),     # the attack as written
    (700_000, "power_w=7e5 is above 1e5 W: give watts \\(7e5 mW = 700 W\\)"),
    (0, "below 1 W: a power is positive"), (-700, "below 1 W: a power is positive"),
])
def test_power_outside_its_plausible_range_is_refused(tmp_path, watts, words):
    with pytest.raises(ProfileError, match=words):
        mb.load_hardware(_write(tmp_path / "my-chip.yaml", _l4(name="my-chip", power_w=watts)))


@pytest.mark.parametrize("watts", [1, 25, 72, 23_000, 100_000])   # edge module to a wafer (~23 kW), bounds in
def test_plausible_powers_load(tmp_path, watts):
    assert mb.load_hardware(_write(tmp_path / "my-chip.yaml", _l4(name="my-chip", power_w=watts))).power_w == watts
