"""Names from the outside world (membound.catalog.names): every bundled name and alias resolves to itself,
loose spellings resolve, misses give a one-line did-you-mean, aliases never collide, and a user
folder cannot silently shadow a bundled device."""
import pickle
import subprocess
import sys

import pytest

import membound as mb
from membound.catalog.dtypes import list_dtypes
from membound.catalog.names import suggest_names
from membound.catalog import hardware, names
from membound.errors import ProfileError, UnknownNameError
from membound.catalog.names import Entry, NameIndex, normalise

LISTS = {"model": mb.list_models, "hardware": mb.list_hardware, "runtime": mb.list_runtimes,
         "dtype": list_dtypes}


@pytest.fixture
def fresh_dirs(monkeypatch):
    """Registered hardware folders as if none were: tests here never leak a folder."""
    monkeypatch.setattr(hardware, "_user_dirs", {})
    monkeypatch.setattr(hardware, "_by_name", {})


def _profile(name: str, aliases=()) -> str:
    text = open(hardware.bundled_profiles_dir() / "l4.yaml", encoding="utf-8").read()
    text = text.replace("name: l4\n", f"name: {name}\n", 1)
    text = "".join(line for line in text.splitlines(True) if not line.startswith("aliases:"))
    if aliases:
        text += "aliases: [" + ", ".join(f'"{a}"' for a in aliases) + "]\n"
    return text


# ---- every bundled name and alias resolves to itself -------------------------------------
@pytest.mark.parametrize("kind", sorted(LISTS))
def test_every_bundled_name_resolves_to_itself(kind):
    for n in LISTS[kind]():
        assert mb.resolve_name(kind, n) == n
        assert mb.resolve_name(kind, n.upper()) == n          # case never matters
        assert mb.resolve_name(kind, f"  {n} ") == n          # nor surrounding space


def test_every_alias_resolves_to_its_own_profile():
    seen = 0
    for n in mb.list_hardware():
        for a in mb.load_hardware(n).aliases:
            assert mb.resolve_name("hardware", a) == n and mb.load_hardware(a).name == n
            seen += 1
    for n in mb.list_models():
        for a in mb.load_model(n).aliases:
            assert mb.resolve_name("model", a) == n and mb.load_model(a).name == n
            seen += 1
    assert seen >= 40      # the bundled files carry vendor spellings and HF ids


@pytest.mark.parametrize("text, kind, name", [
    ("NVIDIA H200 SXM 141GB", "hardware", "h200"),
    ("AMD Instinct MI300X", "hardware", "mi300x"),
    ("NVIDIA H100 80GB HBM3", "hardware", "h100-sxm"),
    ("H100 80GB HBM3", "hardware", "h100-sxm"),
    ("meta-llama/Llama-3.3-70B-Instruct", "model", "llama-3.3-70b"),
    ("deepseek-ai/DeepSeek-R1-0528", "model", "deepseek-r1"),
    ("openai/gpt-oss-120b", "model", "gpt-oss-120b"),
    ("meta-llama/Llama-3.1-8B", "model", "llama-3.1-8b"),     # org/ + a known name
    ("llama3.1-8b", "model", "llama-3.1-8b"), ("LLAMA_3.1_8B", "model", "llama-3.1-8b"),
    ("h100sxm", "hardware", "h100-sxm"), ("H100 SXM", "hardware", "h100-sxm"),
    ("Q4_K_M", "dtype", "q4_k_m"), ("BFloat16", "dtype", "bf16"),
    ("TRT-LLM", "runtime", "tensorrt-llm"), ("Llama.CPP", "runtime", "llama.cpp"),
    # vendor words and a trailing memory size dropped (no alias spells these out)
    ("NVIDIA H100 SXM", "hardware", "h100-sxm"), ("NVIDIA A100 80GB", "hardware", "a100-80gb"),
    ("AMD Radeon RX 7900 XTX", "hardware", "rx-7900-xtx"), ("Intel Arc A770", "hardware", "arc-a770"),
    ("NVIDIA L4 24GB", "hardware", "l4"), ("Meta Llama 3.1 8B", "model", "llama-3.1-8b"),
    # a fine-tune by its variant words: the base preset's architecture
    ("Llama-3.1-8B-Instruct", "model", "llama-3.1-8b"), ("gemma-3-27b-it", "model", "gemma-3-27b"),
    ("Llama-2-7b-chat-hf", "model", "llama-2-7b"), ("Mistral-7B-Instruct-v0.3", "model", "mistral-7b"),
    ("Qwen3-30B-A3B-Instruct-2507", "model", "qwen3-30b-a3b"),
    ("some-org/Qwen3-8B-Instruct-2507", "model", "qwen3-8b"),     # an HF id: its repository name's base
])
def test_outside_spellings_resolve(text, kind, name):
    assert mb.resolve_name(kind, text) == name


# ---- did-you-mean ------------------------------------------------------------------------
@pytest.mark.parametrize("kind, text, wanted", [
    ("hardware", "h100", "h100-sxm"), ("hardware", "h100-sx", "h100-sxm"),
    ("hardware", "h900", "h200"), ("model", "llama3.1-8", "llama-3.1-8b"),
    ("model", "lama-3.1-8b", "llama-3.1-8b"), ("runtime", "vlm", "vllm"), ("dtype", "int3", "int4"),
])
def test_a_miss_suggests_the_intended_name_on_one_line(kind, text, wanted):
    with pytest.raises(UnknownNameError) as e:
        mb.resolve_name(kind, text)
    msg = str(e.value)
    assert wanted in e.value.suggestions and "did you mean" in msg and repr(wanted) in msg
    assert "\n" not in msg and len(e.value.suggestions) <= 3
    assert len(msg) < 200       # never the whole catalogue (51 devices are ~600 characters)


@pytest.mark.parametrize("text", ["NVIDIA H100", "NVIDIA A100", "NVIDIA H200 NVL 80GB", "NVIDIA", "H100 SXM chat",
                                  # another memory size is another card: the 12 GB RTX 3080 streams 912
                                  # GB/s, the profile's 10 GB card 760; the 8 GB RTX 3060 240, the profile's 360
                                  "RTX 3080 12GB", "RTX 3060 8GB", "RTX 4060 Ti 8GB"])
def test_dropping_vendor_words_never_guesses_between_form_factors(text):
    # "NVIDIA H100" is "h100" once the vendor is dropped: SXM, PCIe or NVL, so it stays a miss;
    # an H200 NVL of another memory size is neither the H200 SXM profile nor the 141 GB NVL's
    with pytest.raises(UnknownNameError):
        mb.resolve_name("hardware", text)


def test_the_h200_nvl_is_its_own_profile_not_the_sxm():
    # MLPerf's spelling of the PCIe card names the h200-nvl profile (600 W, 835 TFLOP/s dense bf16), never h200
    assert mb.resolve_name("hardware", "NVIDIA H200 NVL 141GB") == "h200-nvl"
    assert mb.resolve_name("hardware", "NVIDIA H200-NVL-141GB") == "h200-nvl"


def test_h100_suggests_every_h100_and_no_guess():
    # "h100" is ambiguous between three form factors: it is refused, and all three suggested
    assert set(suggest_names("hardware", "h100")) == {"h100-sxm", "h100-pcie", "h100-nvl"}


def test_a_family_name_that_now_means_another_generation_is_no_alias():
    # "Mistral Large" named Large 2 (123B dense) until Dec 2025 and Mistral Large 3 (675B MoE, 41B
    # active) since: resolving it to the 123B preset would be a wrong number for today's model, so it
    # is a miss that suggests the preset by its generation, which still resolves
    with pytest.raises(UnknownNameError, match="mistral-large-2"):
        mb.resolve_name("model", "Mistral Large")
    assert mb.resolve_name("model", "Mistral Large 2") == "mistral-large-2"


def test_cli_estimate_suggests_names():
    # timeouts are hang guards: a busy 2-core machine stretches a 1 s run many times
    run = subprocess.run([sys.executable, "-m", "membound", "estimate", "llama3.1-8b", "h100"],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode != 0
    err = run.stderr.strip()
    assert err.count("\n") == 0 and "'h100-sxm'" in err       # llama3.1-8b itself resolved
    run = subprocess.run([sys.executable, "-m", "membound", "estimate", "llama3.1-8", "h100-sxm"],
                         capture_output=True, text=True, timeout=600)
    assert "'llama-3.1-8b'" in run.stderr and run.stderr.strip().count("\n") == 0


def test_unknown_name_error_pickles_with_its_suggestions():
    e = UnknownNameError("model", "x", ["a", "b"], ["a"])
    back = pickle.loads(pickle.dumps(e))
    assert back == e and back.suggestions == ["a"] and "did you mean 'a'?" in str(back)


# ---- the index's rules -------------------------------------------------------------------
def test_normalise_drops_case_space_and_punctuation():
    assert normalise(" Llama-3.1_8B ") == "llama318b"
    assert normalise("NVIDIA H100 80GB HBM3") == "nvidiah10080gbhbm3"


def test_alias_colliding_with_another_name_or_alias_is_a_profile_error():
    with pytest.raises(ProfileError, match="also a name or alias of 'a-1'"):
        NameIndex.build("hardware", [Entry("a-1"), Entry("b", ("A 1",), "b.yaml")])
    with pytest.raises(ProfileError, match="'x'"):
        NameIndex.build("hardware", [Entry("a", ("X",), "a.yaml"), Entry("b", ("x",), "b.yaml")])
    # one entry repeating its own spelling is harmless
    assert NameIndex.build("hardware", [Entry("a-1", ("A 1", "a1"))]).resolve("A_1") == "a-1"



def test_an_hf_id_alias_answers_to_its_repository_name_unless_two_share_it():
    idx = NameIndex.build("model", [
        Entry("base-7b", ("org/Base-7B", "lab/Distill-Base-7B", "a/Twin-1B")),
        Entry("other-1b", ("b/Twin-1B", "base-7b-chat")),
        Entry("distill-base-7b-x")])
    # the part after '/' resolves, as benchmark tables write it, with variant words dropped as usual
    assert idx.resolve("Distill-Base-7B") == idx.resolve("distill base 7b instruct") == "base-7b"
    # two entries' ids share "Twin-1B": neither gets it (the full ids still resolve)
    with pytest.raises(UnknownNameError):
        idx.resolve("Twin-1B")
    assert idx.resolve("a/Twin-1B") == "base-7b" and idx.resolve("b/Twin-1B") == "other-1b"
    # a name or a plain alias wins over a repository name
    idx = NameIndex.build("model", [Entry("a-7b", ("org/B-7B",)), Entry("b-7b")])
    assert idx.resolve("B-7B") == "b-7b"
    # only models carry HF ids: a device's "X / Y" alias does not make "Y" a name of it
    with pytest.raises(UnknownNameError):
        NameIndex.build("hardware", [Entry("mi250x", ("AMD Instinct MI250X / MI250",))]).resolve("MI250")

def test_names_that_normalise_alike_resolve_only_exactly():
    idx = NameIndex.build("model", [Entry("m-1.5"), Entry("m15")])
    assert idx.resolve("m-1.5") == "m-1.5" and idx.resolve("m15") == "m15"
    with pytest.raises(UnknownNameError) as e:
        idx.resolve("M 15")                      # could be either: refused, both suggested
    assert e.value.suggestions == ["m-1.5", "m15"]


def test_bundled_files_have_no_colliding_spellings():
    for kind in LISTS:
        assert not names.index(kind).ambiguous, kind


# ---- user folders: shadowing, precedence, files added later --------------------------------
def test_folder_shadowing_a_bundled_device_is_refused_unless_override(tmp_path, fresh_dirs):
    (tmp_path / "h100-sxm.yaml").write_text(_profile("h100-sxm"))
    before = mb.load_hardware("h100-sxm")                  # loaded before: order must not matter
    with pytest.raises(ProfileError, match="bundled device"):
        mb.add_hardware_dir(tmp_path)
    assert mb.load_hardware("h100-sxm") == before          # refused folder left nothing behind
    mb.add_hardware_dir(tmp_path, override=True)
    mine = mb.load_hardware("h100-sxm")
    assert mine.display_name == mb.load_hardware(hardware.bundled_profiles_dir() / "l4.yaml").display_name
    assert mb.load_hardware("H100 SXM") == mine           # loose spellings reach the override too


def test_override_wins_whatever_was_loaded_first(tmp_path, fresh_dirs):
    (tmp_path / "l40s.yaml").write_text(_profile("l40s"))
    mb.add_hardware_dir(tmp_path, override=True)
    first = mb.load_hardware("l40s")
    assert first.compute_flops == mb.load_hardware(hardware.bundled_profiles_dir() / "l4.yaml").compute_flops


def test_two_folders_may_not_define_one_name(tmp_path, fresh_dirs):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    (a / "my-chip.yaml").write_text(_profile("my-chip"))
    (b / "my-chip.yaml").write_text(_profile("my-chip"))
    mb.add_hardware_dir(a)
    with pytest.raises(ProfileError, match="also defined by"):
        mb.add_hardware_dir(b, override=True)
    assert mb.load_hardware("my-chip").name == "my-chip"


def test_user_alias_colliding_with_a_bundled_alias_is_refused(tmp_path, fresh_dirs):
    (tmp_path / "my-chip.yaml").write_text(_profile("my-chip", ["NVIDIA H100 80GB HBM3"]))
    with pytest.raises(ProfileError, match="h100-sxm"):
        mb.add_hardware_dir(tmp_path)


def test_profile_added_to_a_registered_folder_becomes_visible(tmp_path, fresh_dirs):
    mb.add_hardware_dir(tmp_path)
    with pytest.raises(UnknownNameError):
        mb.load_hardware("late-chip")
    (tmp_path / "late-chip.yaml").write_text(_profile("late-chip", ["Late Chip 9000"]))
    assert mb.load_hardware("late-chip").name == "late-chip"
    assert mb.load_hardware("late chip 9000").name == "late-chip"
    assert "late-chip" in mb.list_hardware()


# ---- bench: the served model's id names the preset --------------------------------------
def _bench_args(**kw):
    import argparse
    return argparse.Namespace(**{"model": None, "hardware": None, "served_model": None, **kw})


def test_bench_takes_the_preset_from_the_served_model_id():
    from membound.present.bench.cli import _membound_model
    args = _bench_args(hardware="h100-sxm", served_model="meta-llama/Llama-3.1-8B-Instruct")
    assert _membound_model(args) == "llama-3.1-8b"
    assert _membound_model(_bench_args(hardware="h100-sxm", served_model="x", model="qwen3-8b")) == "qwen3-8b"
    assert _membound_model(_bench_args(served_model="meta-llama/Llama-3.1-8B-Instruct")) is None   # no comparison
    with pytest.raises(mb.InvalidInputError, match="nearest: .*llama-3.1-8b"):
        _membound_model(_bench_args(hardware="h100-sxm", served_model="meta-llama/Llama-3.1-8B-Instruct-AWQ"))


@pytest.mark.parametrize("name", ["x" * 100_000, "a\x00b", "", "h100 " * 50,
                                  "x" + " " * 100_000 + "y"])   # the vendor-spelling pattern once took minutes here
def test_names_no_file_system_accepts_are_one_line_unknown_names(name):
    for load in (mb.load_hardware, mb.load_model):
        with pytest.raises(UnknownNameError) as e:
            load(name)
        assert "\n" not in str(e.value) and len(str(e.value)) < 300
