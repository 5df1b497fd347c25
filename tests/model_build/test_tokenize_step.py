"""The tokenizer step of a text ``task:`` (model_build/python_models/hf_tokenize.py) on long inputs, against the
checkpoint's own transformers tokenizer: a question that leaves the context no room is a client error (transformers
refuses it too), and a text far longer than ``max_length`` tokens is cut before tokenizing with the same tokens and
character offsets as tokenizing it whole."""
from __future__ import annotations

import pathlib
import random

import pytest
import transformers

from benchmarks.tooling import text_checkpoints
from model_build.python_models import hf_tokenize

MAX_LENGTH = 32
FAMILIES = ("bert", "roberta", "xlm-roberta")   # WordPiece, byte-level BPE, Unigram


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, pathlib.Path]:
    root = tmp_path_factory.mktemp("tokenizers")
    return {family: text_checkpoints.save(root / family, "question-answering", family) for family in FAMILIES}


def _step(folder: pathlib.Path, pair: bool, max_length: int = MAX_LENGTH) -> hf_tokenize.Tokenize:
    return hf_tokenize.Tokenize(str(folder / "tokenizer.json"), {
        "max_length": str(max_length), "pair": "required" if pair else "none",
        "truncation": "only_second" if pair else "longest_first"})


def _long_text(words: int, seed: int = 0) -> str:
    rng = random.Random(seed)
    vocabulary = ["the", "film", "was", "truly", "moving,", "Crème", "brûlée", "😍", "东京", "don't", "—", "a",
                  "fine", "end.", "\n", "  "]
    return " ".join(rng.choice(vocabulary) for _ in range(words))


@pytest.mark.parametrize("family, special", [("bert", 3), ("roberta", 4)])
def test_a_question_that_leaves_the_context_no_room_is_refused_naming_the_bound(folders, family, special):
    step = _step(folders[family], pair=True)
    room = MAX_LENGTH - special - 1
    context = "a fine film truly moving and the end"
    reference = transformers.AutoTokenizer.from_pretrained(folders[family])
    fits, too_long = " ".join(["the"] * room), " ".join(["the"] * (room + 1))
    step.encode(["who?", fits], [context, context])   # at the bound: answered, as transformers answers it
    reference(fits, context, truncation="only_second", max_length=MAX_LENGTH)
    with pytest.raises(Exception, match="Truncation error"):   # transformers refuses one token more too
        reference(too_long, context, truncation="only_second", max_length=MAX_LENGTH)
    with pytest.raises(hf_tokenize.RequestError) as refused:
        step.encode(["who?", too_long], [context, context])
    assert str(refused.value) == (
        f"TEXT row 1 is {room + 1} tokens; this model reads at most {MAX_LENGTH} tokens per row (its "
        f"sequence_length) and cuts only TEXT_PAIR to fit, so TEXT must leave it room: send a TEXT of at most "
        f"{room} tokens")


@pytest.mark.parametrize("family", FAMILIES)
def test_a_long_text_is_cut_before_tokenizing_with_the_tokens_and_offsets_of_the_whole(folders, family):
    step = _step(folders[family], pair=False)
    reference = transformers.AutoTokenizer.from_pretrained(folders[family])
    for seed in range(3):
        text = _long_text(3000, seed)
        assert len(step.cut_before_tokenizing(text)) < len(text)   # the cut happened
        got = step.encode([text])
        want = reference(text, truncation=True, max_length=MAX_LENGTH, return_offsets_mapping=True)
        n = len(want["input_ids"])
        assert got["input_ids"][0, :n].tolist() == want["input_ids"]
        assert [tuple(o) for o in got["offsets"][0, :n].tolist()] == [tuple(o) for o in want["offset_mapping"]]


@pytest.mark.parametrize("family", FAMILIES)
def test_a_long_context_is_cut_before_tokenizing_and_the_question_never(folders, family):
    step = _step(folders[family], pair=True)
    reference = transformers.AutoTokenizer.from_pretrained(folders[family])
    question, context = "who made the film?", _long_text(3000, 7)
    got = step.encode([question], [context])
    want = reference(question, context, truncation="only_second", max_length=MAX_LENGTH)
    assert got["input_ids"][0, :len(want["input_ids"])].tolist() == want["input_ids"]


def test_no_cut_where_it_could_change_the_tokens(folders):
    step = _step(folders["bert"], pair=False)
    one_word = "x" * 50_000   # no whitespace to cut at: tokenized whole
    assert step.cut_before_tokenizing(one_word) is one_word
    # Whitespace near the limit, but too few tokens before it (long words): tokenized whole.
    sparse = " ".join(["y" * 120] * 400)
    assert step.cut_before_tokenizing(sparse) is sparse
    left = hf_tokenize.Tokenize(str(folders["bert"] / "tokenizer.json"), {
        "max_length": str(MAX_LENGTH), "truncation_side": "left"})   # keeps the end: never cut from the front
    text = _long_text(3000)
    assert left.cut_before_tokenizing(text) is text
