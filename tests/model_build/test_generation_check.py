"""The build's check of a generating task (model_build/backends/python/generation_check.py) passes the engine that
ships, and fails a planted defect: an engine that picks another token alone, or only once requests share a batch,
is refused with the prompt, the position, both tokens and the reference's margin."""
from __future__ import annotations

import pathlib
import re
import shutil

import pytest

pytest.importorskip("transformers")

from benchmarks.tooling import generation_checkpoints  # noqa: E402
from deployment_spec.spec import parse_spec  # noqa: E402
from model_build.backends.python import generation_check  # noqa: E402
from model_build.errors import BuildError  # noqa: E402
from model_build.recipes import load_python  # noqa: E402

# The engine's greedy choice for a whole batch (generation_engine.Engine._choose), and what the defects put there.
GREEDY = "return [int(token) for token in logits.argmax(dim=-1).tolist()]"
SECOND_BEST = "return [int(token) for token in logits.topk(2, dim=-1).indices[:, 1].tolist()]"
SECOND_BEST_IN_A_BATCH = ("return [int(token) for token in (logits.topk(2, dim=-1).indices[:, 1] if len(rows) > 1 "
                          "else logits.argmax(dim=-1)).tolist()]")


@pytest.fixture(scope="module")
def made(module_tmp) -> tuple:
    root = module_tmp.mktemp("check")
    generation_checkpoints.save(root / "gpt2", "gpt2")
    raw = {"project": "Check", "triton_version": "25.09", "signing": {"unsigned_reason": "a test"},
           "models": {"writer": {"backend": "python", "weights": "gpt2", "max_batch_size": 8,
                                 "task": {"kind": "text-generation"}}},
           "endpoints": {"chat": {"kind": "single-model", "models": ["writer"], "instance_type": "ml.g5.xlarge"}},
           "environments": {"dev": {"region": "us-east-1"}}}
    spec = parse_spec(raw, root / "spec.yaml")
    model = spec.models["writer"]
    return model, load_python(model, spec.root, False), root


def _with(made: tuple, replacement: str, name: str) -> dict:
    """The model's files with the engine's greedy choice replaced."""
    _, python_model, root = made
    files = dict(python_model.files)
    source = pathlib.Path(files["generation_engine.py"]).read_text()
    assert source.count(GREEDY) == 1  # the line the defects replace is still the engine's
    engine = root / name / "generation_engine.py"
    engine.parent.mkdir()
    engine.write_text(source.replace(GREEDY, replacement))
    shutil.copy(files["step_requests.py"], engine.parent / "step_requests.py")
    files["generation_engine.py"], files["step_requests.py"] = engine, engine.parent / "step_requests.py"
    return files


def test_the_engine_that_ships_decodes_as_generate(made: tuple) -> None:
    model, python_model, _ = made
    verification = generation_check.verify(model, python_model.files, lambda _line: None)
    assert verification.ran and verification.cases == len(generation_check.PROMPTS)
    assert (verification.details["alone"], verification.details["engine_batch"],
            verification.details["left_padded_generate"]) == ("token-identical",) * 3


@pytest.mark.parametrize("defect,where", [(SECOND_BEST, "alone"), (SECOND_BEST_IN_A_BATCH, "the engine's running batch")])
def test_an_engine_that_picks_other_tokens_fails_the_build(made: tuple, defect: str, where: str) -> None:
    model = made[0]
    with pytest.raises(BuildError) as caught:
        generation_check.verify(model, _with(made, defect, where.split()[-1]), lambda _line: None)
    message = str(caught.value)
    pattern = (rf"models\.writer: verification prompt 0 \('The quick brown fox'\), {re.escape(where)}: new token 0 is "
               r"\d+ where transformers' generate picks \d+ \(its top two logits [\d.e+-]+ apart, not a near-tie\); the "
               r"served decoding differs from transformers' for this architecture: report it with the checkpoint's "
               r"config\.json")
    assert re.fullmatch(pattern, message), message
