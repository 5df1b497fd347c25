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


def _with_generation_config(made: tuple, name: str, **settings: object) -> dict:
    """The model's files with its checkpoint's generation_config.json updated by ``settings``."""
    import transformers

    _, python_model, root = made
    files = dict(python_model.files)
    folder = root / name
    shutil.copytree(files["checkpoint"], folder)
    config = transformers.GenerationConfig.from_pretrained(folder)
    config.update(**settings)
    config.save_pretrained(folder)
    files["checkpoint"] = folder
    return files


def test_beam_search_and_a_repetition_penalty_in_generation_config_are_noted_not_used(made: tuple) -> None:
    """bart-large-cnn-like: the reference is generate with num_beams 1 and repetition_penalty 1, as a request decodes
    unless it asks otherwise; the build says so in its log and the manifest."""
    lines: list[str] = []
    files = _with_generation_config(made, "beams", num_beams=4, length_penalty=2.0, repetition_penalty=1.3)
    verification = generation_check.verify(made[0], files, lines.append)
    assert verification.details["alone"] == verification.details["engine_batch"] == "token-identical"
    notes = verification.details["not_applied"]
    assert len(notes) == 2 and "num_beams 4 (beam search)" in notes[0] and "repetition_penalty 1.3" in notes[1]
    assert [line for line in lines if "num_beams 4" in line]


def test_a_generation_config_the_engine_cannot_follow_fails_the_build(made: tuple) -> None:
    with pytest.raises(BuildError, match=r"models\.writer: generation_config\.json sets bad_words_ids \[\[5\]\], which "
                                         r"transformers' generate applies to greedy decoding \(NoBadWordsLogitsProcessor"):
        generation_check.verify(made[0], _with_generation_config(made, "bad", bad_words_ids=[[5]]), lambda _line: None)


@pytest.mark.parametrize("lines, why", [
    (["transformers==4.57.6", "torch=={p}", "--no-deps"],
     "its decoding was checked with transformers {t} and torch {p} on the build machine, but its execution "
     "environment pins transformers 4.57.6 and torch {p}"),
    (["transformers=={t}"], "its decoding was checked with transformers {t} and torch {p} on the build machine, but "
                            "its execution environment pins transformers {t} and torch (not pinned)"),
])
def test_a_check_counts_for_the_serving_release_only_when_the_environment_pins_what_it_ran(lines, why) -> None:
    import importlib.metadata

    from deployment_spec.builds.manifest import Verification

    here = {"t": importlib.metadata.version("transformers"), "p": importlib.metadata.version("torch").split("+")[0]}
    ran = Verification(ran=True, runtime="transformers", version=here["t"], details={"alone": "token-identical"})
    same = generation_check.served_by(ran, [f"transformers=={here['t']}", f"torch=={here['p']}", "numpy==1.26.4"],
                                      "25.09")
    assert same.triton_version == "25.09" and same.why is None
    assert same.details == {"alone": "token-identical", "serving_packages": f"transformers {here['t']} and torch "
                            f"{here['p']}, as the execution environment pins them"}
    other = generation_check.served_by(ran, [line.format(**here) for line in lines], "25.09")
    assert other.triton_version is None and other.why == why.format(**here)
