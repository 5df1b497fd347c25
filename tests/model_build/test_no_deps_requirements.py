"""A recipe's requirements marked NO_DEPS resolve to exactly their pins (pip --no-deps): the tokenizer step's
environment is tokenizers and numpy, not the 15 packages huggingface_hub brings (benchmarks/task_env_size.md); the image
and audio steps' are transformers without the packages it declares for models, tokenizers and its CLI. Its
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


def test_the_image_steps_environment_is_transformers_without_what_it_declares_for_models():
    # What `import transformers` loads, and Pillow: the served image tasks run in exactly this
    # (tests/local_endpoint/test_raw_image_tasks.py); the audio step adds soundfile and its cffi to the same list.
    from model_build.recipes import audio_steps, contract, image_steps

    assert image_steps.PREPROCESS_REQUIREMENTS[0] == NO_DEPS
    assert audio_steps.PREPROCESS_REQUIREMENTS == (*contract.TRANSFORMERS_WITHOUT_MODELS, "soundfile==0.14.0",
                                                   "cffi==2.1.1")
    locked = resolve.resolve(list(image_steps.PREPROCESS_REQUIREMENTS), target.for_this_machine(), "preprocess")
    pins = sorted(tuple(line.lower().split("==")) for line in image_steps.PREPROCESS_REQUIREMENTS[1:])
    assert sorted((x.name.lower(), x.version) for x in locked) == pins
    assert not {"tokenizers", "torch", "typer", "pydantic", "hf-xet"} & {x.name.lower() for x in locked}
