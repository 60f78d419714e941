"""estimate()'s hot path (issue 33): a Result whose memory, bound and step terms are built on their
first read is the same Result as one built whole; counts are checked in one call, in their order;
configurations cached by the identity of their objects never answer for another object."""
import copy
import dataclasses
import pickle

import numpy as np
import pytest

import membound as mb
from membound.physics.result import Memory, Result

README = dict(model="llama-3.1-70b", hardware="h100-sxm", n_chips=8, batch=16, prompt_tokens=2048,
              output_tokens=512, weight_dtype="fp8")


def test_deferred_fields_are_built_on_first_read_and_kept():
    r = mb.estimate(**README)
    assert {"memory", "bound", "step_terms_s"}.isdisjoint(vars(r))       # not built yet
    mem = r.memory
    assert r.memory is mem and "memory" in vars(r)                          # built once, then kept
    # one H100 tier (its profile's HBM3): its placement holds all of the chip's weights and KV
    (tier,) = mem.placement
    (hbm,) = mb.load_hardware("h100-sxm").memory
    assert (tier.tier, tier.weights_bytes, tier.kv_bytes) == (hbm.name, mem.weights_bytes, mem.kv_bytes)
    assert tier.capacity_bytes == mem.capacity_bytes == hbm.capacity_bytes
    assert mem.fits and mem.total_bytes <= mem.capacity_bytes
    # the bound is the largest step term (the first on ties)
    terms = r.step_terms_s
    assert list(terms) == ["memory", "compute", "latency", "communication", "overhead", "draft"]
    assert r.bound == max(terms, key=terms.__getitem__)


def test_a_result_with_deferred_fields_equals_one_built_whole():
    r = mb.estimate(**README)
    whole = Result(**{f.name: getattr(r, f.name) for f in dataclasses.fields(Result)})
    assert mb.estimate(**README) == whole == r                      # equality reads every field
    for other in (pickle.loads(pickle.dumps(mb.estimate(**README))), copy.copy(mb.estimate(**README)),
                  dataclasses.replace(mb.estimate(**README))):
        assert other == whole and other.to_dict() == whole.to_dict()
    assert str(mb.estimate(**README)) == str(whole)


def test_counts_are_checked_in_their_order_and_numpy_integers_pass():
    with pytest.raises(mb.InvalidInputError, match="batch"):
        mb.estimate(**{**README, "batch": 0, "prompt_tokens": -1})
    with pytest.raises(mb.InvalidInputError, match="prompt_tokens"):
        mb.estimate(**{**README, "prompt_tokens": -1, "output_tokens": 0})
    with pytest.raises(mb.InvalidInputError, match="output_tokens"):
        mb.estimate(**{**README, "output_tokens": 0})
    with pytest.raises(mb.InvalidInputError, match="n_chips"):
        mb.estimate(**{**README, "n_chips": 0})
    for bad in (True, 16.0, "16"):
        with pytest.raises(mb.InvalidInputError, match="batch"):
            mb.estimate(**{**README, "batch": bad})
    assert mb.estimate(**{**README, "batch": np.int64(16)}) == mb.estimate(**README)


def test_an_equal_model_object_answers_alike_and_a_changed_one_does_not():
    m = mb.load_model("llama-3.1-8b")
    same = m.model_copy()                          # another object, equal by value
    deeper = m.model_copy(update={"n_layers": 64, "max_context": None})   # the same name, twice the layers
    one = mb.estimate(m, "h100-sxm", prompt_tokens=0, output_tokens=1, runtime="ideal")
    assert mb.estimate(same, "h100-sxm", prompt_tokens=0, output_tokens=1, runtime="ideal") == one
    two = mb.estimate(deeper, "h100-sxm", prompt_tokens=0, output_tokens=1, runtime="ideal")
    # twice the layers stream more weights, so the step is slower (the layers' share of 8B doubles)
    assert two.tpot_s > one.tpot_s
    assert mb.estimate(m, "h100-sxm", prompt_tokens=0, output_tokens=1, runtime="ideal") == one


def test_a_memory_built_field_by_field_equals_one_built_whole():
    # the README example (a count given) and every argument at its default (the fewest-chips
    # search, which reads only whether each count fits: the memory's other fields wait for a read)
    search = mb.estimate("llama-3.1-8b", "h100-sxm").memory
    assert set(vars(search)) == {"fits", "_deferred"}
    for mem in (search, mb.estimate(**README).memory):
        whole = Memory(**{f.name: getattr(mem, f.name) for f in dataclasses.fields(Memory)})
        assert mem == whole and hash(mem) == hash(whole) and repr(mem) == repr(whole)
        assert mem.total_bytes == whole.total_bytes and mem.placement == whole.placement
    fresh = mb.estimate("llama-3.1-8b", "h100-sxm").memory         # nothing read yet
    assert pickle.loads(pickle.dumps(fresh)) == fresh == copy.copy(fresh) == dataclasses.replace(fresh)
