"""Configurations of one structure evaluated at once (`base.stacking`): every stackable class says
the role of each of its fields, and structure / stack follow those roles."""
from dataclasses import dataclass

import numpy as np
import pytest

from membound.base.stacking import field_names, numbers, stack, stackable, stackable_classes, structure, with_numbers
from membound.physics.core import Chip, ChipBase, Knobs
from membound.physics.efficiency import Efficiency
from membound.physics.parallel import Collectives
import membound as mb
from membound.serving.api import build
from membound.serving.lengths import as_length
from membound.serving.step import StepModel


def column(values):
    return np.array(values)[:, None]


@stackable(shape="n", numbers="x y pair", own="tag")
@dataclass(frozen=True)
class Toy:
    n: float
    x: float
    y: float
    pair: tuple
    tag: str
    extra: float = 0.0      # named in no role: shape


def step_model(model, hardware, **kw) -> StepModel:
    """serve()'s step model of a configuration (1,024-token prompts, 256-token outputs)."""
    return build(model, hardware, prompt=as_length("prompt_tokens", 1024, 0),
                 output=as_length("output_tokens", 256, 2), **kw)[0]


def toy(**kw):
    return Toy(**{**dict(n=2.0, x=1.5, y=3.0, pair=(0.5, "a"), tag="first"), **kw})


# ---- every field of every stackable class has one role --------------------------------------------
def test_the_library_s_stackable_classes_are_these():
    assert {Knobs, ChipBase, Chip, Collectives, Efficiency, StepModel} <= set(stackable_classes())


@pytest.mark.parametrize("cls", [Knobs, ChipBase, Chip, Collectives, Efficiency])
def test_every_field_of_a_stackable_class_has_exactly_one_role(cls):
    # a field added to the class without a role here fails: say whether the evaluation branches on it
    roles = stackable_classes()[cls]
    names = set(cls._fields) if issubclass(cls, tuple) else {f for f in cls.__dataclass_fields__}
    assert not roles.shape & roles.numbers and not roles.shape & roles.own and not roles.numbers & roles.own
    assert roles.shape | roles.numbers | roles.own == names


@pytest.mark.parametrize("kw", [dict(model="llama-3.1-8b", hardware="h100-sxm"),
                                dict(model="qwen3-30b-a3b", hardware="mi300x", n_chips=2, runtime="vllm"),
                                dict(model="llama-3.1-8b", hardware="h200",
                                     speculative=mb.mtp("llama-3.1-8b", 3, 0.7))])
def test_every_attribute_of_a_step_model_has_exactly_one_role(kw):
    # StepModel's fields are the attributes its builder sets (speculative decoding's included)
    sm = step_model(**kw)
    roles = stackable_classes()[StepModel]
    assert roles.shape | roles.numbers | roles.own == set(field_names(sm))
    assert not roles.shape & roles.numbers and not roles.own & (roles.shape | roles.numbers)


# ---- structure and stack follow the roles, on a class made for it ---------------------------------
def test_numbers_may_differ_and_shape_and_unnamed_fields_may_not():
    base = structure(toy())
    assert structure(toy(x=9.0, y=-1.0, pair=(7.0, "a"))) == base     # numbers
    assert structure(toy(tag="second")) == base                          # own: left out
    assert structure(toy(n=3.0)) != base                                 # shape
    assert structure(toy(n=-0.0)) != structure(toy(n=0.0))               # by value: -0.0 is not 0.0
    assert structure(toy(extra=1.0)) != base                             # a field with no role: shape
    assert structure(toy(pair=(0.5, "b"))) != base                       # a text inside numbers: itself
    assert structure(toy(x=1)) != base                                   # an int is not a float column


def test_numbers_are_the_floats_structure_leaves_out_and_with_numbers_puts_others_back():
    # toy(): n shape, x y numbers, pair (0.5, "a") numbers item by item, tag own, extra shape
    got: list = []
    key = numbers(toy(), got)
    assert got == [1.5, 3.0, 0.5]
    for other in (toy(x=9.0, y=-1.0, pair=(7.0, "a")), toy(tag="second"), toy(n=3.0), toy(n=-0.0), toy(extra=1.0),
                  toy(pair=(0.5, "b")), toy(x=1), toy(n=2), toy(n=0.0)):    # equal exactly where structure is
        assert (numbers(other, []) == key) == (structure(other) == structure(toy()))
    assert numbers(toy(n=-0.0), []) != numbers(toy(n=0.0), []) and numbers(toy(n=2), []) != key
    other = with_numbers(toy(), iter([9.0, -1.0, 7.0]))
    assert other == toy(x=9.0, y=-1.0, pair=(7.0, "a")) and other.tag == "first"
    marks = with_numbers(toy(), iter(["x", "y", "p"]))       # any objects, no __init__ check run
    assert (marks.x, marks.y, marks.pair, marks.n) == ("x", "y", ("p", "a"), 2.0)


def test_a_stack_holds_the_differing_numbers_as_columns_and_the_rest_once():
    a, b, c = toy(), toy(x=2.5, pair=(0.25, "a"), tag="second"), toy(x=3.5, tag="third")
    s = stack([a, b, c], column)
    assert np.array_equal(s.x, [[1.5], [2.5], [3.5]])           # differs: a column, one row each
    assert s.y == 3.0 and type(s.y) is float                     # shared: the number itself
    assert np.array_equal(s.pair[0], [[0.5], [0.25], [0.5]]) and s.pair[1] == "a"
    assert s.n == 2.0 and s.tag == "first"                       # shape and own: the first's
    assert stack([a, toy(tag="x")], column) is a                 # nothing differs: the first itself


def test_zero_and_negative_zero_are_different_numbers():
    s = stack([toy(x=0.0), toy(x=-0.0)], column)
    assert np.copysign(1.0, s.x[:, 0]).tolist() == [1.0, -1.0]


def test_a_stacked_step_model_evaluates_each_configuration_s_step():
    # 8B with vLLM on one H100 and one H200: one structure; the stacked step at b = 4 decoding
    # sequences of 1,000 pairs is each model's own step, row by row
    sms = [step_model("llama-3.1-8b", h, runtime="vllm") for h in ("h100-sxm", "h200")]
    assert structure(sms[0]) == structure(sms[1])
    s = stack(sms, column)
    got = s.step(4.0, 1000.0)
    assert got.shape == (2, 1)
    assert got[0, 0] == sms[0].step(4.0, 1000.0) and got[1, 0] == sms[1].step(4.0, 1000.0)
    assert s.prepared is sms[0].prepared                         # own: the first's


def test_layouts_differ_in_structure():
    one, two = (step_model("llama-3.1-8b", "h100-sxm", n_chips=n) for n in (1, 2))
    assert structure(one) != structure(two)
