"""Python-backend recipes: the text-preprocess tokenizer step, T5 generation, and a task's tokenizer (or image
preprocessing) and answer steps (deployment_spec/sections/tasks.py)."""
from __future__ import annotations

import pathlib

from deployment_spec.builds.manifest import TensorSpec
from deployment_spec.sections.model import ModelSpec
from deployment_spec.sections.tasks import ANSWER_RECIPE, AUDIO_RECIPE, GENERATE_RECIPE, IMAGE_RECIPE, TOKENIZE_RECIPE
from model_build import tokenizer_files
from model_build.errors import BuildError
from model_build.recipes.contract import TEMPLATES, TRANSFORMERS_REQUIREMENTS, PythonModel, weights_dir

DEFAULT_SEQUENCE = 128
T5_SIZES = {
    "t5-small": dict(vocab_size=32128, d_model=512, d_kv=64, d_ff=2048, num_layers=6, num_heads=8),
    "tiny-t5": dict(vocab_size=512, d_model=32, d_kv=16, d_ff=64, num_layers=2, num_heads=2),
}

T5_REQUIREMENTS = TRANSFORMERS_REQUIREMENTS  # what t5_generate.py imports


def python_model(model: ModelSpec, root: pathlib.Path, consumer_int32: bool) -> PythonModel:
    recipe = model.source.recipe
    if recipe == "text-preprocess":
        return _text_preprocess(model, root, consumer_int32)
    if recipe in T5_SIZES:
        return _t5(model, root)
    if recipe == AUDIO_RECIPE:
        from model_build.recipes import audio_steps
        return audio_steps.preprocess(model, root)
    if recipe == IMAGE_RECIPE:
        from model_build.recipes import image_steps
        return image_steps.preprocess(model, root)
    if recipe == GENERATE_RECIPE:
        from model_build.recipes import generate_model
        return generate_model.generate(model, root)
    if recipe in (TOKENIZE_RECIPE, ANSWER_RECIPE):
        from model_build.recipes import task_steps
        return (task_steps.tokenize(model, root, consumer_int32) if recipe == TOKENIZE_RECIPE
                else task_steps.answer(model, root, consumer_int32))
    raise BuildError(f"models.{model.name}.source.recipe: {recipe!r} is not a Python-backend recipe")


def _text_preprocess(model: ModelSpec, root: pathlib.Path, consumer_int32: bool) -> PythonModel:
    seq = model.sequence_length or DEFAULT_SEQUENCE
    weights = weights_dir(model, root)
    if weights is not None:
        vocab = weights / "vocab.txt"
        if not vocab.is_file():
            raise BuildError(f"models.{model.name}.weights: {weights} has no vocab.txt; text-preprocess needs the "
                             "classifier's WordPiece vocabulary (vocab.txt)")
        vocab_file, note = vocab, f"tokenizer vocabulary from {vocab}"
    else:
        vocab_file = tokenizer_files.bert_vocab_text().encode()
        note = (f"no weights directory: built a {len(tokenizer_files.bert_vocab())}-entry WordPiece vocabulary "
                "locally (offline)")
    # A TensorRT classifier takes INT32 ids (the ONNX is exported with int32 inputs for it).
    id_type = "TYPE_INT32" if consumer_int32 else "TYPE_INT64"
    return PythonModel(
        files={"model.py": TEMPLATES / "text_preprocess.py", "vocab.txt": vocab_file},
        inputs=(TensorSpec("TEXT", "TYPE_STRING", (1,)),),
        outputs=(TensorSpec("input_ids", id_type, (seq,)), TensorSpec("attention_mask", id_type, (seq,))),
        parameters={"max_length": str(seq), "lower_case": "true"},
        note=note,
    )


def _t5(model: ModelSpec, root: pathlib.Path) -> PythonModel:
    weights = weights_dir(model, root)
    seq = model.sequence_length or DEFAULT_SEQUENCE
    files: dict = {"model.py": TEMPLATES / "t5_generate.py"}
    if weights is not None:
        tokenizer = weights / "tokenizer.json"
        if not tokenizer.is_file():
            raise BuildError(f"models.{model.name}.weights: {weights} has no tokenizer.json; save the tokenizer with "
                             "transformers (tokenizer.save_pretrained) into that directory")
        files["tokenizer.json"] = tokenizer
        files["t5"] = weights
        note = f"T5 weights from {weights}"
    else:
        files["tokenizer.json"] = tokenizer_files.t5_tokenizer_json().encode()
        files["t5"] = _random_t5(model.source.recipe)
        note = (f"no weights directory: {model.source.recipe} initialised with random weights from its "
                "architecture config (seed 0); tokenizer built locally (offline)")
    return PythonModel(
        files=files,
        inputs=(TensorSpec("TEXT", "TYPE_STRING", (1,)),),
        outputs=(TensorSpec("OUTPUT_TEXT", "TYPE_STRING", (1,)), TensorSpec("output_ids", "TYPE_INT64", (-1,))),
        parameters={"max_input_length": str(seq), "max_new_tokens": "32"},
        note=note,
        requirements=T5_REQUIREMENTS,
    )


def _t5_config(recipe: str):
    from transformers import T5Config

    return T5Config(**T5_SIZES[recipe], pad_token_id=0, eos_token_id=1, decoder_start_token_id=0)


def parameter_count(recipe: str) -> int:
    """Parameters of the T5 architecture without weights: built on the meta device (shapes only)."""
    import torch
    from transformers import T5ForConditionalGeneration

    with torch.device("meta"):
        return sum(p.numel() for p in T5ForConditionalGeneration(_t5_config(recipe)).parameters())


def _random_t5(recipe: str) -> dict[str, bytes]:
    """save_pretrained output of a seeded random T5, as {relative path: bytes}."""
    import tempfile

    import torch
    from transformers import T5ForConditionalGeneration

    torch.manual_seed(0)
    model = T5ForConditionalGeneration(_t5_config(recipe)).eval()
    with tempfile.TemporaryDirectory() as tmp:
        model.save_pretrained(tmp)
        return {p.relative_to(tmp).as_posix(): p.read_bytes() for p in sorted(pathlib.Path(tmp).rglob("*"))
                if p.is_file()}
