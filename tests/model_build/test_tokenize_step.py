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


# --- question answering's overlapping windows (doc_stride) -----------------------------------------------------

STRIDE = 8


def _window_step(folder: pathlib.Path, max_windows: int = 64) -> hf_tokenize.Tokenize:
    return hf_tokenize.Tokenize(str(folder / "tokenizer.json"), {
        "max_length": str(MAX_LENGTH), "pair": "required", "truncation": "only_second",
        "doc_stride": str(STRIDE), "max_windows": str(max_windows)})


@pytest.mark.parametrize("family", FAMILIES)
def test_windows_are_transformers_overflowing_windows(folders, family):
    """Each row's windows equal transformers' tokenizer call in the QA pipeline (stride, return_overflowing_tokens):
    the first in the usual tensors, the others in window_* ones, window_count of them per row."""
    step = _window_step(folders[family])
    reference = transformers.AutoTokenizer.from_pretrained(folders[family])
    questions = ["who?", "what moved?", "when?"]
    contexts = [_long_text(30, seed=1), "a fine film", _long_text(60, seed=2)]
    made = step.encode(questions, contexts)
    counts = []
    for row, (question, context) in enumerate(zip(questions, contexts)):
        want = reference(question, context, truncation="only_second", max_length=MAX_LENGTH, stride=STRIDE,
                         return_overflowing_tokens=True, return_offsets_mapping=True)
        counts.append(len(want["input_ids"]))
        assert int(made["window_count"][row, 0]) == len(want["input_ids"]) - 1
        for index, (ids, offsets) in enumerate(zip(want["input_ids"], want["offset_mapping"])):
            prefix = "" if index == 0 else "window_"
            at = (row,) if index == 0 else (row, index - 1)
            real = made[prefix + "attention_mask"][at] == 1
            assert made[prefix + "input_ids"][at][real].tolist() == ids
            assert [tuple(o) for o in made[prefix + "offsets"][at][real].tolist()] == [tuple(o) for o in offsets]
            words = [-1 if w is None else w for w in want.encodings[index].word_ids]
            specials = want.encodings[index].special_tokens_mask
            assert made[prefix + "word_ids"][at][real].tolist() == [-1 if s else w for w, s in zip(words, specials)]
    assert counts[1] == 1 and counts[0] >= 2 and counts[2] >= 4  # not vacuous: one window, and several


def test_a_request_without_long_contexts_still_sends_window_tensors(folders):
    made = _window_step(folders["bert"]).encode(["who?"], ["a fine film"])
    assert made["window_count"].tolist() == [[0]] and made["window_input_ids"].shape == (1, 1, 1)


def test_a_context_of_more_windows_than_allowed_is_refused_naming_the_bound(folders):
    step = _window_step(folders["bert"], max_windows=2)
    with pytest.raises(hf_tokenize.RequestError) as refused:
        step.encode(["who?", "who?"], ["a fine film", _long_text(90, seed=2)])
    windows = len(transformers.AutoTokenizer.from_pretrained(folders["bert"])(
        "who?", _long_text(90, seed=2), truncation="only_second", max_length=MAX_LENGTH, stride=STRIDE,
        return_overflowing_tokens=True)["input_ids"])
    assert str(refused.value) == (
        f"TEXT_PAIR row 1 needs {windows} windows of {MAX_LENGTH} tokens (overlapping by {STRIDE}); this model reads "
        "at most 2 per row (task.max_windows): send a shorter TEXT_PAIR, or raise task.max_windows in the spec")


def test_a_huge_context_is_cut_before_tokenizing_and_refused_as_more_than_allowed(folders):
    step = _window_step(folders["bert"], max_windows=3)
    with pytest.raises(hf_tokenize.RequestError) as refused:
        step.encode(["who?"], ["word " * 1_000_000])
    assert str(refused.value).startswith("TEXT_PAIR row 0 needs more than 3 windows of 32 tokens")


@pytest.mark.parametrize("family, special", [("bert", 3), ("roberta", 4)])
def test_a_question_that_leaves_no_room_beyond_the_stride_is_refused_naming_the_bound(folders, family, special):
    """tokenizers panics (a PanicException, no Exception) on such a window: the step refuses it first."""
    step = _window_step(folders[family])
    room = MAX_LENGTH - special - STRIDE - 1
    context = _long_text(14, seed=3)
    fits, too_long = " ".join(["the"] * room), " ".join(["the"] * (room + 1))
    assert int(step.encode([fits], [context])["window_count"][0, 0]) >= 2  # at the bound: answered, in windows
    with pytest.raises(hf_tokenize.RequestError) as refused:
        step.encode(["who?", too_long], [context, context])
    assert str(refused.value) == (
        f"TEXT row 1 is {room + 1} tokens; this model reads {MAX_LENGTH} tokens per window (its sequence_length) and "
        f"repeats {STRIDE} context tokens from one window to the next (task.doc_stride), so TEXT must leave TEXT_PAIR "
        f"more than {STRIDE}: send a TEXT of at most {room} tokens")


@pytest.mark.parametrize("sent, used", [(4, 4), ("0", 0), (4.0, 4), (10_000, STRIDE), ("wide", STRIDE), (True, STRIDE)])
def test_a_request_sends_its_own_doc_stride_for_itself_only(folders, sent, used):
    """The pipeline's per-call doc_stride: applied where the answer step takes it (hf_answer.REQUEST_OPTIONS, which
    refuses the rest naming the bound); the next request gets the spec's again."""
    step = hf_tokenize.Tokenize(str(folders["bert"] / "tokenizer.json"), {
        "max_length": str(MAX_LENGTH), "pair": "required", "truncation": "only_second", "doc_stride": str(STRIDE),
        "max_doc_stride": "27", "max_windows": "64"})
    reference = transformers.AutoTokenizer.from_pretrained(folders["bert"])
    context = _long_text(40, seed=4)

    def windows(stride):
        return len(reference("who?", context, truncation="only_second", max_length=MAX_LENGTH, stride=stride,
                             return_overflowing_tokens=True)["input_ids"])

    made = step.encode(["who?"], [context], {"doc_stride": sent})
    assert int(made["window_count"][0, 0]) + 1 == windows(used)
    again = step.encode(["who?"], [context])
    assert int(again["window_count"][0, 0]) + 1 == windows(STRIDE) != windows(4)


@pytest.mark.parametrize("family", FAMILIES)
def test_the_builds_long_context_takes_several_windows_of_any_tokenizer(folders, family):
    """The build's check (task_check) reads one context of 2 to MOST_WINDOWS windows, cut to fit the tokenizer."""
    from model_build.backends.ensemble import task_reference

    step = _window_step(folders[family], max_windows=task_reference.MOST_WINDOWS)

    def windows_of(question, context):
        try:
            return 1 + int(step.encode([question], [context])["window_count"][0, 0])
        except hf_tokenize.RequestError:
            return None

    row = task_reference.long_row(MAX_LENGTH, windows_of)
    assert row is not None and 2 <= windows_of(row.text, row.pair) <= task_reference.MOST_WINDOWS
    assert task_reference.long_row(MAX_LENGTH, lambda question, context: None) is None  # the question refused
