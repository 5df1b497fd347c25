"""A recipe's requirements marked NO_DEPS resolve to exactly their pins (pip --no-deps): the tokenizer step's
environment is tokenizers and numpy, not the 15 packages huggingface_hub brings (benchmarks/task_env_size.md). Its
twin: the same pins without the mark resolve to the dependency closure, so the mark is what cut it."""
from __future__ import annotations

from deployment_spec.sections.requirements import NO_DEPS
from model_build.python_env import resolve, target
from model_build.recipes import task_steps

PINS = ("tokenizers==0.23.3", "numpy==1.26.4")


def test_the_tokenizer_steps_environment_is_its_two_pins():
    assert task_steps.TOKENIZE_REQUIREMENTS == (NO_DEPS, *PINS)
    locked = resolve.resolve(list(task_steps.TOKENIZE_REQUIREMENTS), target.for_this_machine(), "tokenize")
    assert [(x.name, x.version) for x in locked] == [("numpy", "1.26.4"), ("tokenizers", "0.23.3")]


def test_without_the_mark_the_same_pins_bring_their_dependencies():
    locked = resolve.resolve(list(PINS), target.for_this_machine(), "tokenize")
    names = {x.name.lower() for x in locked}
    assert {"numpy", "tokenizers", "huggingface_hub"} <= names and len(names) >= 10
