"""Hostile inputs: fuzzed hardware profiles and config.json files become the library's own
errors naming the file and field — never a bare KeyError/TypeError/ZeroDivisionError, never a
NaN or inf in a result. The counters at the bottom report how many cases were tried."""
import json
import math
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import membound as mb
from membound.hardware import load_hardware_file

CASES = {"profile": 0, "profile_ok": 0, "config": 0, "config_ok": 0, "yaml_text": 0}
BASE_PROFILE = yaml.safe_load(Path(mb.hardware.bundled_profiles_dir() / "h100-sxm.yaml").read_text())
BASE_CONFIG = {"model_type": "llama", "hidden_size": 256, "intermediate_size": 688, "num_hidden_layers": 4,
               "num_attention_heads": 8, "num_key_value_heads": 2, "vocab_size": 1000,
               "tie_word_embeddings": False}

hostile_values = st.one_of(
    st.none(), st.booleans(), st.integers(-10**30, 10**30),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=20),
    st.lists(st.integers(), max_size=3), st.dictionaries(st.text(max_size=5), st.integers(), max_size=2),
    st.sampled_from([0, -1, 1e-300, 1e300, float("nan"), float("inf"), -0.0, "1e12", "fast"]))


def _paths(d, prefix=()):
    for k, v in d.items():
        yield prefix + (k,)
        if isinstance(v, dict):
            yield from _paths(v, prefix + (k,))
        if isinstance(v, list):
            for i, item in enumerate(v):
                if isinstance(item, dict):
                    yield from _paths(item, prefix + (k, i))


def _mutate(base, path, value, action):
    data = json.loads(json.dumps(base))
    node = data
    for p in path[:-1]:
        node = node[p]
    if action == "delete" and isinstance(node, dict):
        node.pop(path[-1], None)
    elif action == "unknown" and isinstance(node, dict):
        node["unexpected_key"] = value
    else:
        node[path[-1]] = value
    return data


def _check_result_finite(r):
    for k, v in r.to_dict().items():
        if isinstance(v, float):
            assert math.isfinite(v), (k, v)


PROFILE_PATHS = list(_paths(BASE_PROFILE))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(PROFILE_PATHS), hostile_values, st.sampled_from(["set", "delete", "unknown"]))
def test_fuzzed_profiles_raise_profile_error_or_load_clean(tmp_path, path, value, action):
    CASES["profile"] += 1
    f = tmp_path / "fuzz.yaml"
    try:
        f.write_text(yaml.safe_dump(_mutate(BASE_PROFILE, path, value, action), allow_unicode=True))
    except (ValueError, yaml.YAMLError):
        return
    try:
        hw = load_hardware_file(f)
    except mb.ProfileError as e:
        assert str(f) in str(e)
        return
    CASES["profile_ok"] += 1
    try:
        r = mb.estimate("llama-3.2-1b", hw, prompt_tokens=64, output_tokens=8, check_memory=False)
    except mb.MemboundError:
        return
    _check_result_finite(r)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(max_size=300))
def test_arbitrary_yaml_text(tmp_path, text):
    CASES["yaml_text"] += 1
    f = tmp_path / "text.yaml"
    f.write_text(text, encoding="utf-8")
    with pytest.raises(mb.ProfileError):
        load_hardware_file(f)


@pytest.mark.parametrize("text", [
    "!!python/object/apply:os.system ['echo pwned']\n",
    "name: !!python/object:builtins.object {}\n",
    "memory: &a [*a]\n",
    "\x00\x01\x02",
    "- just\n- a list\n",
])
def test_dangerous_yaml(tmp_path, text):
    f = tmp_path / "bad.yaml"
    f.write_text(text)
    with pytest.raises(mb.ProfileError, match="bad.yaml"):
        load_hardware_file(f)


def test_huge_and_binary_files(tmp_path):
    big = tmp_path / "big.yaml"
    big.write_text("x: " + "9" * 2_000_000)
    with pytest.raises(mb.ProfileError, match="bytes"):
        load_hardware_file(big)
    binary = tmp_path / "bin.yaml"
    binary.write_bytes(bytes(range(256)) * 10)
    with pytest.raises(mb.ProfileError):
        load_hardware_file(binary)
    with pytest.raises(mb.ProfileError, match="no such file"):
        mb.load_hardware(tmp_path / "missing.yaml")


CONFIG_KEYS = list(BASE_CONFIG) + ["sliding_window", "num_local_experts", "num_experts_per_tok",
                                   "head_dim", "layer_types", "kv_lora_rank"]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(CONFIG_KEYS), hostile_values, st.sampled_from(["set", "delete"]),
       st.sampled_from(["llama", "mistral", "mixtral", "qwen2", "qwen3", "deepseek_v3", "gpt_oss", "bert", 7, None]))
def test_fuzzed_hf_configs(tmp_path, key, value, action, model_type):
    CASES["config"] += 1
    cfg = dict(BASE_CONFIG, model_type=model_type)
    if action == "delete":
        cfg.pop(key, None)
    else:
        cfg[key] = value
    f = tmp_path / "config.json"
    f.write_text(json.dumps(cfg))
    try:
        m = mb.Model.from_hf_config(f)
    except mb.MemboundError:
        return
    CASES["config_ok"] += 1
    assert m.total_params > 0 and math.isfinite(m.total_params)
    r = mb.estimate(m, "h100-sxm", prompt_tokens=16, output_tokens=4, check_memory=False)
    _check_result_finite(r)


def test_zz_report_case_counts(capsys):
    # Printed with `pytest -s tests/test_hostile_inputs.py`; the closing note quotes it.
    with capsys.disabled():
        print(f"\nfuzz cases tried: {CASES}")
    assert CASES["profile"] > 0 and CASES["config"] > 0


@pytest.mark.parametrize("key, value", [("num_hidden_layers", 10**9), ("hidden_size", 10**12),
                                        ("vocab_size", 10**30)])
def test_absurd_sizes_are_refused_at_once(tmp_path, key, value):
    # found by the fuzz test in a fresh venv: 10**9 layers made the per-layer count loop run for minutes
    f = tmp_path / "config.json"
    f.write_text(json.dumps(dict(BASE_CONFIG, **{key: value})))
    with pytest.raises(mb.ProfileError, match="less than or equal"):
        mb.Model.from_hf_config(f)
