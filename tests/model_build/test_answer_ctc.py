"""model_build/python_models/answer_ctc.py against transformers' own CTC decoding (5.23.0).

Tokenizers are made offline from vocab.json files written here (letters, a word delimiter, <pad> as the CTC
blank, <unk>, <s>, </s>) and saved with save_pretrained, so that ``load_params`` reads what a checkpoint holds.
Two references:

* ``Wav2Vec2CTCTokenizer.batch_decode`` of the argmax ids, on random logits built from runs of tokens with
  many repeats and blanks (and some all-equal frames, where argmax takes the first id), in both of its modes:
  ``skip_special_tokens=False`` (what the pipeline uses for CTC) and ``True``.
* ``pipeline("automatic-speech-recognition")`` on a tiny Wav2Vec2ForCTC with random weights (torch.manual_seed(0)):
  the model's logits for a waveform go to ``answer``, whose text must be the pipeline's.

Planted defects (no grouping of repeats; the blank dropped before grouping) must make the comparison fail.
"""
from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
import torch
import transformers
from transformers import (Wav2Vec2Config, Wav2Vec2CTCTokenizer, Wav2Vec2FeatureExtractor, Wav2Vec2ForCTC)

from model_build.python_models import answer_ctc

RATE = 16000
SPECIALS = ["<pad>", "<s>", "</s>", "<unk>"]
LETTERS = list("ABCDEFGHIJKLMNOPQRSTUVWXYZ'")


def _vocab(delimiter: str = "|", extra: list[str] | None = None, specials: list[str] | None = None) -> dict[str, int]:
    tokens = (specials or SPECIALS) + [delimiter] + LETTERS + (extra or [])
    return {t: i for i, t in enumerate(tokens)}


def _save_tokenizer(folder, vocab: dict[str, int], **kwargs) -> Wav2Vec2CTCTokenizer:
    """The tokenizer saved to ``folder`` as a checkpoint holds it; returned as built (see the custom delimiter)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "vocab.json").write_text(json.dumps(vocab))
    tokenizer = Wav2Vec2CTCTokenizer(str(folder / "vocab.json"), **kwargs)
    tokenizer.save_pretrained(folder)
    return tokenizer


def _runs_of_tokens(rng: np.random.Generator, frames: int, vocab_size: int, blank: int, delimiter: int) -> np.ndarray:
    """Frame ids as CTC emits them: tokens held for a few frames, blanks between, letters doubled across blanks."""
    ids: list[int] = []
    while len(ids) < frames:
        roll = rng.random()
        token = blank if roll < 0.35 else delimiter if roll < 0.45 else int(rng.integers(0, vocab_size))
        ids += [token] * int(rng.integers(1, 4))
        if rng.random() < 0.2 and ids[-1] != blank:  # "L <pad> L": a real double letter
            ids += [blank, ids[-1]]
    return np.array(ids[:frames])


def _logits(rng: np.random.Generator, rows: int, frames: int, vocab_size: int, blank: int, delimiter: int,
            ids_range: int | None = None) -> np.ndarray:
    ids = np.stack([_runs_of_tokens(rng, frames, ids_range or vocab_size, blank, delimiter) for _ in range(rows)])
    logits = rng.normal(0, 0.5, (rows, frames, vocab_size)).astype(np.float32)
    np.put_along_axis(logits, ids[..., None], 5.0, axis=-1)
    logits[:, ::17] = 0.0  # all-equal frames: numpy and torch both take the first id
    return logits


def _reference(tokenizer, logits: np.ndarray, counts: np.ndarray, skip: bool) -> list[str]:
    ids = torch.from_numpy(logits).argmax(dim=-1)
    return tokenizer.batch_decode([ids[row, :count] for row, count in enumerate(counts)], skip_special_tokens=skip)


def _check_against_batch_decode(folder, tokenizer, seed: int, ids_range_extra: int = 0) -> list[str]:
    params = answer_ctc.load_params(folder)
    json.dumps(params)  # what the build writes into config.pbtxt
    vocab_size = max(int(i) for i in params["id_to_token"]) + 1 + ids_range_extra
    rng = np.random.default_rng(seed)
    blank = tokenizer.convert_tokens_to_ids(tokenizer.pad_token)
    delimiter = tokenizer.convert_tokens_to_ids(tokenizer.word_delimiter_token)
    logits = _logits(rng, 6, 80, vocab_size, blank, delimiter)
    counts = rng.integers(0, 81, 6)
    counts[0] = 80
    texts = []
    for skip in (False, True):
        expected = _reference(tokenizer, logits, counts, skip)
        assert answer_ctc.answer(logits, counts, {**params, "skip_special_tokens": skip}) == expected
        texts += expected
    return texts


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A tiny Wav2Vec2ForCTC with its tokenizer and feature extractor, saved as a checkpoint folder."""
    folder = tmp_path_factory.mktemp("ctc")
    vocab = _vocab()
    _save_tokenizer(folder, vocab)
    tokenizer = Wav2Vec2CTCTokenizer.from_pretrained(folder)  # as the checkpoint loads it, as the pipeline does
    Wav2Vec2FeatureExtractor(feature_size=1, sampling_rate=RATE, padding_value=0.0, do_normalize=True,
                             return_attention_mask=False).save_pretrained(folder)
    torch.manual_seed(0)
    config = Wav2Vec2Config(vocab_size=len(vocab), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                            intermediate_size=32, conv_dim=(8, 8), conv_stride=(5, 4), conv_kernel=(10, 8),
                            num_conv_pos_embeddings=4, num_conv_pos_embedding_groups=2, pad_token_id=vocab["<pad>"],
                            feat_extract_norm="group")
    model = Wav2Vec2ForCTC(config).eval()
    with torch.no_grad():  # a head that varies from frame to frame: letters, word breaks and blanks
        model.lm_head.weight.normal_(0, 1)
        model.lm_head.bias.zero_()
        model.lm_head.bias[vocab["<pad>"]] = 6.0
        model.lm_head.bias[vocab["|"]] = 2.0
    model.save_pretrained(folder)
    return folder, tokenizer, model


def _pipeline(folder):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return transformers.pipeline("automatic-speech-recognition", model=str(folder), device="cpu")


def _model_logits(model, feature_extractor, wave: np.ndarray) -> np.ndarray:
    inputs = feature_extractor(wave, sampling_rate=RATE, return_tensors="pt")
    with torch.no_grad():
        return model(**inputs).logits.numpy()


def _waves() -> list[np.ndarray]:
    rng = np.random.default_rng(1)
    return [rng.normal(0, 0.3, n).astype(np.float32) for n in (1200, 4000, 9001)]


# --- against batch_decode ---------------------------------------------------------------------------------------

def test_hello_by_hand(checkpoint):
    folder, tokenizer, _ = checkpoint
    params = answer_ctc.load_params(folder)
    vocab = tokenizer.get_vocab()
    frames = "<pad> H H E <pad> L L <pad> L O O | | <pad> W O <pad> R L D D <pad> <s> </s> <unk>".split()
    ids = np.array([vocab[t] for t in frames])
    logits = np.eye(len(vocab), dtype=np.float32)[ids][None]
    assert answer_ctc.answer(logits, None, params) == ["HELLO WORLD<s></s><unk>"]
    assert answer_ctc.answer(logits, None, params) == tokenizer.batch_decode(ids[None])
    # skip_special_tokens=True drops the blank before grouping: the doubled L becomes one.
    assert answer_ctc.answer(logits, None, {**params, "skip_special_tokens": True}) == ["HELO WORLD"]
    assert tokenizer.batch_decode(ids[None], skip_special_tokens=True) == ["HELO WORLD"]


def test_random_logits_equal_batch_decode(checkpoint):
    folder, tokenizer, _ = checkpoint
    texts = _check_against_batch_decode(folder, tokenizer, seed=0)
    assert any("<unk>" in t for t in texts) and any(" " in t for t in texts)
    # Ids past the vocabulary (a model whose vocab_size exceeds the tokenizer's) decode as the unk token.
    _check_against_batch_decode(folder, tokenizer, seed=1, ids_range_extra=3)


def test_lower_case_and_custom_word_delimiter(tmp_path):
    # "|" stays an ordinary token here; "#" separates words. The reference is the tokenizer built with these
    # settings: transformers 5.23 drops word_delimiter_token when loading it (next test).
    vocab = _vocab(delimiter="#", extra=["|"])
    tokenizer = _save_tokenizer(tmp_path, vocab, word_delimiter_token="#", do_lower_case=True)
    texts = _check_against_batch_decode(tmp_path, tokenizer, seed=2)
    assert any(" " in t for t in texts) and any("|" in t for t in texts)
    assert all(t == t.lower() and "#" not in t for t in texts)
    loaded = Wav2Vec2CTCTokenizer.from_pretrained(tmp_path)
    assert loaded.do_lower_case
    assert loaded.word_delimiter_token == "|" and json.loads((tmp_path / "tokenizer_config.json").read_text())[
        "word_delimiter_token"] == "#"


def test_clean_up_tokenization_spaces(tmp_path):
    vocab = _vocab(extra=[".", ",", "?", "!"])
    tokenizer = _save_tokenizer(tmp_path, vocab, clean_up_tokenization_spaces=True)
    assert tokenizer.clean_up_tokenization_spaces
    params = answer_ctc.load_params(tmp_path)
    ids = np.array([vocab[t] for t in "I | ' M | H E R E | . | Y O U ' R E | N ' T | ?".split()])
    logits = np.eye(len(vocab), dtype=np.float32)[ids][None]
    assert answer_ctc.answer(logits, None, params) == tokenizer.batch_decode(ids[None]) == ["I 'M HERE. YOU'RE N'T?"]
    _check_against_batch_decode(tmp_path, tokenizer, seed=3)


def test_legacy_special_tokens_map_and_added_tokens(tmp_path):
    """A checkpoint of the 4.x era: no added_tokens_decoder, so special_tokens_map.json and added_tokens.json count."""
    vocab = _vocab(specials=["[PAD]", "<s>", "</s>", "[UNK]"], extra=["<noise>"])
    (tmp_path / "vocab.json").write_text(json.dumps(vocab))
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "Wav2Vec2CTCTokenizer", "unk_token": "<unk>", "pad_token": "<pad>",
        "word_delimiter_token": "|", "do_lower_case": False}))
    (tmp_path / "special_tokens_map.json").write_text(json.dumps({
        "bos_token": "<s>", "eos_token": "</s>", "unk_token": "[UNK]", "pad_token": "[PAD]",
        "additional_special_tokens": ["<noise>"]}))
    (tmp_path / "added_tokens.json").write_text(json.dumps({"<laugh>": len(vocab)}))
    tokenizer = Wav2Vec2CTCTokenizer.from_pretrained(tmp_path)
    assert tokenizer.pad_token == "[PAD]" and "<noise>" in tokenizer.all_special_tokens
    params = answer_ctc.load_params(tmp_path)
    assert params["pad_token"] == "[PAD]" and "<noise>" in params["special_tokens"]
    texts = _check_against_batch_decode(tmp_path, tokenizer, seed=4, ids_range_extra=2)
    assert any("<laugh>" in t for t in texts) and any("<noise>" in t for t in texts)


# --- against the pipeline ---------------------------------------------------------------------------------------

def test_equals_the_pipeline_on_waveforms(checkpoint):
    folder, _, model = checkpoint
    pipe = _pipeline(folder)
    assert pipe.type == "ctc"
    params = answer_ctc.load_params(folder)
    feature_extractor = Wav2Vec2FeatureExtractor.from_pretrained(folder)
    per_wave = [_model_logits(model, feature_extractor, wave) for wave in _waves()]
    expected = [pipe(wave)["text"] for wave in _waves()]
    assert [answer_ctc.answer(logits, None, params)[0] for logits in per_wave] == expected
    assert len(set(expected)) == 3 and all(len(t) > 3 for t in expected), expected

    # The same rows padded to one batch with garbage frames: lengths (or a frame mask) drop those frames.
    counts = np.array([logits.shape[1] for logits in per_wave])
    batch = np.random.default_rng(2).normal(0, 3, (3, counts.max(), per_wave[0].shape[2])).astype(np.float32)
    for row, logits in enumerate(per_wave):
        batch[row, :counts[row]] = logits[0]
    assert answer_ctc.answer(batch, counts, params) == expected
    assert answer_ctc.answer(batch, counts[:, None], params) == expected
    mask = np.arange(counts.max())[None, :] < counts[:, None]
    assert answer_ctc.answer(batch, mask.astype(np.int32), params) == expected
    assert answer_ctc.answer(batch, None, params)[:2] != expected[:2]


def _checkpoint_with_tokenizer(folder, model, vocab, **kwargs):
    _save_tokenizer(folder, vocab, **kwargs)
    Wav2Vec2FeatureExtractor(feature_size=1, sampling_rate=RATE).save_pretrained(folder)
    model.save_pretrained(folder)
    return _pipeline(folder), answer_ctc.load_params(folder), Wav2Vec2FeatureExtractor.from_pretrained(folder)


def test_lower_case_equals_the_pipeline(checkpoint, tmp_path):
    _, _, model = checkpoint
    pipe, params, feature_extractor = _checkpoint_with_tokenizer(tmp_path, model, _vocab(), do_lower_case=True)
    for wave in _waves():
        text = pipe(wave)["text"]
        assert answer_ctc.answer(_model_logits(model, feature_extractor, wave), None, params) == [text]
        assert text == text.lower() and " " in text


def test_custom_delimiter_differs_from_the_pipeline_only_by_it(checkpoint, tmp_path):
    """transformers 5.23 loads word_delimiter_token="#" as "|", so the pipeline leaves "#" in the text."""
    _, _, model = checkpoint
    vocab = _vocab(delimiter="#")  # same size as the model's vocabulary; "#" where "|" was
    pipe, params, feature_extractor = _checkpoint_with_tokenizer(tmp_path, model, vocab, word_delimiter_token="#")
    assert pipe.tokenizer.word_delimiter_token == "|"
    for wave in _waves():
        text = pipe(wave)["text"]
        assert "#" in text
        assert answer_ctc.answer(_model_logits(model, feature_extractor, wave), None, params) == [
            text.replace("#", " ").strip()]


# --- planted defects: the comparisons can fail -------------------------------------------------------------------

def _no_grouping(ids, table, params, skip_special_tokens):
    kept = ids[~table.blank[ids]]
    return "".join(table.shown[i] for i in kept).strip()


def _blank_dropped_first(ids, table, params, skip_special_tokens):
    ids = ids[~table.blank[ids]]
    groups = table.group[ids]
    first = np.ones(len(ids), dtype=bool)
    first[1:] = groups[1:] != groups[:-1]
    return "".join(table.shown[i] for i in ids[first]).strip()


@pytest.mark.parametrize("defect", [_no_grouping, _blank_dropped_first])
def test_planted_defects_are_caught(checkpoint, monkeypatch, defect):
    folder, tokenizer, model = checkpoint
    _check_against_batch_decode(folder, tokenizer, seed=5)  # the real one passes
    monkeypatch.setattr(answer_ctc, "_text", defect)
    with pytest.raises(AssertionError):
        _check_against_batch_decode(folder, tokenizer, seed=5)
    pipe = _pipeline(folder)
    params = answer_ctc.load_params(folder)
    feature_extractor = Wav2Vec2FeatureExtractor.from_pretrained(folder)
    got = [answer_ctc.answer(_model_logits(model, feature_extractor, w), None, params)[0] for w in _waves()]
    assert got != [pipe(w)["text"] for w in _waves()]


def test_bad_lengths_refused(checkpoint):
    params = answer_ctc.load_params(checkpoint[0])
    logits = np.zeros((2, 5, 32), dtype=np.float32)
    with pytest.raises(ValueError, match=r"frame counts must lie in \[0, 5\], got \[6, 1\]"):
        answer_ctc.answer(logits, np.array([6, 1]), params)
    with pytest.raises(ValueError, match="lengths must be"):
        answer_ctc.answer(logits, np.array([1, 2, 3]), params)
    with pytest.raises(ValueError, match="logits must be"):
        answer_ctc.answer(logits[0], None, params)


def test_nested_vocabulary_needs_target_lang(tmp_path):
    (tmp_path / "vocab.json").write_text(json.dumps({"eng": _vocab(), "fra": _vocab()}))
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "Wav2Vec2CTCTokenizer"}))
    with pytest.raises(ValueError, match="names no target_lang"):
        answer_ctc.load_params(tmp_path)
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"target_lang": "fra"}))
    assert answer_ctc.load_params(tmp_path)["id_to_token"]["5"] == "A"


def test_a_tokenizer_without_vocab_json_is_refused_naming_its_class(tmp_path):
    # A tokenizer class this decoding does not follow: the refusal says which the checkpoint has and what is read.
    with pytest.raises(ValueError) as caught:
        answer_ctc.load_params(tmp_path)
    assert str(caught.value) == f"{tmp_path}: vocab.json is missing or not a JSON object; a CTC tokenizer needs it"
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "MyCTCTokenizer"}))
    with pytest.raises(ValueError) as caught:
        answer_ctc.load_params(tmp_path)
    assert str(caught.value) == (
        f"{tmp_path}: vocab.json is missing or not a JSON object (tokenizer_config.json names tokenizer_class "
        "MyCTCTokenizer; the CTC answer step decodes with a Wav2Vec2CTCTokenizer's vocab.json or the tokenizer.json "
        "of ParakeetTokenizer or LasrTokenizer only); a CTC tokenizer needs it")


def test_a_piece_tokenizer_without_tokenizer_json_or_with_another_decoder_is_refused(tmp_path):
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "ParakeetTokenizer"}))
    with pytest.raises(ValueError) as caught:
        answer_ctc.load_params(tmp_path)
    assert str(caught.value) == (
        f"{tmp_path}: tokenizer.json is missing or has no model; ParakeetTokenizer keeps its vocabulary there (save "
        "the checkpoint's tokenizer with save_pretrained)")
    (tmp_path / "tokenizer.json").write_text(json.dumps({"model": {"type": "BPE", "vocab": {"a": 0}},
                                                         "decoder": {"type": "ByteLevel"}}))
    with pytest.raises(ValueError) as caught:
        answer_ctc.load_params(tmp_path)
    assert str(caught.value) == (
        f"{tmp_path}: tokenizer.json's decoder is ByteLevel; the CTC answer step decodes ParakeetTokenizer pieces "
        "with the Metaspace decoder only")


@pytest.mark.parametrize("kind", ["ParakeetTokenizer", "LasrTokenizer"])
def test_piece_tokenizers_decode_as_the_pipeline_does(kind, tmp_path):
    # transformers' own tokenizer of the class, saved and loaded as the pipeline loads it, decodes argmax ids as
    # pipeline("automatic-speech-recognition") does (skip_special_tokens=False): repeats, blanks, word pieces,
    # a piece with the word mark inside, added special tokens, ids past the vocabulary.
    import transformers
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    pieces = [("<pad>", 0.0), ("<unk>", 0.0), ("\u2581", -1.0), ("\u2581the", -1.5), ("ing", -1.5),
              ("a\u2581b", -3.0)] + [(c, -2.0) for c in "ABCDEFGH'"]
    backend = Tokenizer(models.Unigram(pieces, unk_id=1))
    backend.pre_tokenizer = pre_tokenizers.Metaspace()
    backend.decoder = decoders.Metaspace()
    made = getattr(transformers, kind)(tokenizer_object=backend, pad_token="<pad>", unk_token="<unk>")
    made.add_special_tokens({"eos_token": "</s>"})
    made.save_pretrained(tmp_path)
    loaded = transformers.AutoTokenizer.from_pretrained(tmp_path)
    assert type(loaded).__name__ == kind
    params = answer_ctc.load_params(tmp_path)
    vocab = len(loaded) + 2  # a head wider than the tokenizer: those ids decode to nothing
    rng = np.random.default_rng(7)
    for _ in range(300):
        ids = rng.integers(0, vocab, size=int(rng.integers(1, 14)))
        ids = np.repeat(ids, rng.integers(1, 3, size=len(ids)))  # runs of one id, which CTC collapses
        logits = np.full((1, len(ids), vocab), -5.0, dtype=np.float32)
        logits[0, np.arange(len(ids)), ids] = 5.0
        want = loaded.decode(ids.tolist(),
                             skip_special_tokens=False)
        assert answer_ctc.answer(logits, None, params) == [want], ids.tolist()
