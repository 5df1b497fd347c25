"""Tiny audio checkpoints made offline for audio ``task:`` tests and benchmarks, each with its feature extractor.

For the tests (no hub access on the build machines): a transformers audio model at a few thousand parameters,
random weights (seed 0) saved with their head, and the feature extractor (and, for CTC, the character
tokenizer) its family ships with, at 16 kHz, saved together as ``save_pretrained`` writes a checkpoint.
Families: ``wav2vec2`` (group-normalised feature encoder, raw samples), ``hubert`` (layer-normalised), ``ast``
(a log-mel spectrogram of fixed length). A CTC head's weights are spread out so the transcript has letters,
word breaks and blanks, not one repeated token. Imports torch and transformers (build and tests only).

``save_mapped`` (benchmarks/hf_audio_coverage.py): any architecture transformers maps to audio classification or
CTC, from its own config (benchmarks/tooling/tiny_checkpoints.py's shrunk sizes, the feature encoder's
convolutions narrowed too), with the feature extractor transformers maps for its model type and, for CTC, the
tokenizer class it maps, on a vocabulary of letters.
"""
from __future__ import annotations

import json
import pathlib
from typing import Any, Optional

from benchmarks.tooling import tiny_checkpoints

LABELS = ["speech", "music", "noise"]
RATE = 16000
SPECIALS = ["<pad>", "<s>", "</s>", "<unk>"]
LETTERS = list("ABCDEFGHIJKLMNOPQRSTUVWXYZ'")
# A small feature encoder: 10-sample kernels at stride 5, then 8 at stride 4 (20 samples a frame).
ENCODER = dict(hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32, conv_dim=(8, 8),
               conv_stride=(5, 4), conv_kernel=(10, 8), num_conv_pos_embeddings=4, num_conv_pos_embedding_groups=2)


def _config(family: str, **extra: Any) -> Any:
    import transformers as t

    if family == "wav2vec2":
        return t.Wav2Vec2Config(feat_extract_norm="group", **ENCODER, **extra)
    if family == "hubert":
        return t.HubertConfig(feat_extract_norm="layer", do_stable_layer_norm=True, **ENCODER, **extra)
    if family == "ast":
        return t.ASTConfig(hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
                           patch_size=16, frequency_stride=10, time_stride=10, max_length=128, num_mel_bins=32,
                           **extra)
    raise ValueError(f"family {family!r}: one of wav2vec2, hubert, ast")


def _extractor(family: str) -> Any:
    import transformers as t

    if family == "ast":
        return t.ASTFeatureExtractor(sampling_rate=RATE, num_mel_bins=32, max_length=128)
    return t.Wav2Vec2FeatureExtractor(feature_size=1, sampling_rate=RATE, padding_value=0.0, do_normalize=True,
                                      return_attention_mask=family != "wav2vec2")


def save(folder: pathlib.Path, task: str, family: str = "wav2vec2") -> pathlib.Path:
    """``task``: audio-classification or automatic-speech-recognition (CTC)."""
    import torch
    import transformers as t

    folder.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    _extractor(family).save_pretrained(folder)
    if task == "audio-classification":
        labels = dict(id2label=dict(enumerate(LABELS)), label2id={v: k for k, v in enumerate(LABELS)})
        model = t.AutoModelForAudioClassification.from_config(_config(family, **labels))
    else:
        vocab = {token: i for i, token in enumerate(SPECIALS + ["|"] + LETTERS)}
        (folder / "vocab.json").write_text(json.dumps(vocab))
        t.Wav2Vec2CTCTokenizer(str(folder / "vocab.json")).save_pretrained(folder)
        model = t.AutoModelForCTC.from_config(_config(family, vocab_size=len(vocab), pad_token_id=vocab["<pad>"]))
        _spread_head(model, len(vocab), blank=vocab["<pad>"], delimiter=vocab["|"])
    model.eval().save_pretrained(folder)
    return folder


def _spread_head(model: Any, vocab_size: int, blank: int, delimiter: int, scale: float = 1.0) -> Any:
    """The CTC head made to vary from frame to frame: letters, word breaks and blanks, not one repeated token
    (the initialiser's small weights make every frame a blank); ``scale``: its weights' spread, for hidden states
    of unit size. Returns the head."""
    import torch

    head = next(m for m in reversed(list(model.modules()))
                if isinstance(getattr(m, "bias", None), torch.nn.Parameter) and m.weight.shape[0] == vocab_size)
    with torch.no_grad():
        head.weight.normal_(0, scale)
        head.bias.zero_()
        head.bias[blank] = 6.0
        head.bias[delimiter] = 2.0
    return head


# --- any mapped architecture (benchmarks/hf_audio_coverage.py) ---------------------------------------------

CONV_WIDTH = 32  # the feature encoder's channels (512 in wav2vec2-base); kernels and strides stay the config's
# Where the feature extractor transformers 5.23.0 maps for a model type (models/auto/feature_extraction_auto.py)
# makes what its model does not take, the one the model documents: feature_extraction_auto.py maps
# Wav2Vec2FeatureExtractor (raw input_values) for wav2vec2-bert, whose model takes input_features of
# feature_projection_input_dim (160), "the dimension after processing input audios with
# [`SeamlessM4TFeatureExtractor`]" (models/wav2vec2_bert/configuration_wav2vec2_bert.py).
DOCUMENTED_EXTRACTORS = {"wav2vec2-bert": "SeamlessM4TFeatureExtractor"}
# A CTC model type transformers maps no tokenizer for (sew, sew-d, wavlm in models/auto/tokenization_auto.py)
# has Wav2Vec2Processor mapped (processing_auto.py): a feature extractor and a Wav2Vec2CTCTokenizer, as in
# transformers' own tests of them (tests/models/sew/test_modeling_sew.py: "asapp/sew-tiny-100k-ft-ls100h").
PROCESSOR_TOKENIZER = "Wav2Vec2CTCTokenizer"
WORD = "\u2581"  # SentencePiece's word boundary, the word delimiter of tokenizers-backed CTC tokenizers


class NoFeatureExtractor(Exception):
    """The feature extractor transformers maps for the model type cannot be made here; the message says why."""


def extractor_class(model_type: str) -> Any:
    """The feature extractor class for ``model_type`` (see DOCUMENTED_EXTRACTORS); NoFeatureExtractor where
    transformers maps none."""
    import transformers
    from transformers.models.auto import feature_extraction_auto

    mapped = vars(feature_extraction_auto)["FEATURE_EXTRACTOR_MAPPING_NAMES"].get(model_type)
    name = DOCUMENTED_EXTRACTORS.get(model_type, mapped)
    if not name:
        raise NoFeatureExtractor(f"no feature extractor: transformers maps none for model type {model_type}")
    # A class whose library is absent (torchaudio) is a stand-in that raises ImportError when made: _made_extractor.
    found = getattr(transformers, name, None)
    if found is None:
        raise NoFeatureExtractor(f"no feature extractor: transformers maps {name}, which it does not export")
    return found


def save_mapped(model_type: str, class_name: str, folder: pathlib.Path) -> dict[str, str]:
    """A tiny random ``class_name`` (an audio classifier or a CTC model) saved into ``folder`` with its feature
    extractor (and a CTC model's tokenizer): their descriptions ("parameters", "feature_extractor",
    "tokenizer"). NoFeatureExtractor or tiny_checkpoints.NotInstantiable where they cannot be made."""
    extractor = _made_extractor(model_type)
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer = _made_tokenizer(model_type, folder) if class_name.endswith("ForCTC") else None
    config = tiny_checkpoints.shrunk_config(model_type)
    _narrow_encoder(config)
    if tokenizer is None:
        config.id2label, config.label2id = dict(enumerate(LABELS)), {v: k for k, v in enumerate(LABELS)}
    else:
        _fit_vocabulary(config, len(tokenizer), tokenizer.pad_token_id)
    net, count = tiny_checkpoints._instantiate(model_type, class_name, config, gentle=False)
    features = _features(extractor)
    if tokenizer is not None:
        _spread_ctc_head(net, tokenizer, features)
    tiny_checkpoints._runs(net, model_type, class_name, features)
    net.save_pretrained(folder)
    extractor.save_pretrained(folder)
    made = {"parameters": f"{count:,} parameters", "feature_extractor": type(extractor).__name__}
    if tokenizer is not None:
        tokenizer.save_pretrained(folder)
        made["tokenizer"] = f"{type(tokenizer).__name__} ({len(tokenizer)} tokens)"
    return made


def _spread_ctc_head(net: Any, tokenizer: Any, features: dict[str, Any]) -> None:
    """``_spread_head`` with weights scaled to the size of the hidden states the head takes: not every
    architecture normalises them (SEW's are far below 1, and every frame would come out blank)."""
    import torch

    def spread(scale: float) -> Any:
        return _spread_head(net, len(tokenizer), blank=tokenizer.pad_token_id,
                            delimiter=tokenizer.convert_tokens_to_ids(_delimiter(tokenizer)), scale=scale)

    sizes: list[float] = []  # the root mean square of the head's input

    def measure(_module: Any, given: tuple[Any, ...], _out: Any) -> None:
        sizes.append(float(given[0].pow(2).mean().sqrt()))

    hook = spread(1.0).register_forward_hook(measure)
    try:
        with torch.no_grad():
            net(**features)
    except Exception:  # tiny_checkpoints._runs says why, next
        return
    finally:
        hook.remove()
    spread(1.0 / max(sizes[0], 1e-3) if sizes else 1.0)


def _made_extractor(model_type: str) -> Any:
    cls = extractor_class(model_type)
    try:
        return cls()  # the class's defaults: a checkpoint's own saved values differ by model size, not by kind
    except Exception as exc:  # extractors raise what they like (a missing library); reported as the reason
        # transformers' message for a missing library spans lines: all of it, on one line
        raise NoFeatureExtractor(f"no feature extractor: {cls.__name__}() fails: {type(exc).__name__}: "
                                 f"{' '.join(str(exc).split())}") from None


def _narrow_encoder(config: Any) -> None:
    """The convolutional feature encoder's channels narrowed (sub-configs too); its kernels and strides, which
    make the frames per second, kept."""
    from transformers import PretrainedConfig

    for one in [config] + [v for v in vars(config).values() if isinstance(v, PretrainedConfig)]:
        if isinstance(getattr(one, "conv_dim", None), (list, tuple)):
            one.conv_dim = [min(width, CONV_WIDTH) for width in one.conv_dim]


def _fit_vocabulary(config: Any, size: int, pad: int) -> None:
    """The CTC head's vocabulary is the tokenizer's, its pad token (the CTC blank) the tokenizer's."""
    from transformers import PretrainedConfig

    for one in [config] + [v for v in vars(config).values() if isinstance(v, PretrainedConfig)]:
        if "vocab_size" in vars(one):
            one.vocab_size = size
        if "pad_token_id" in vars(one):
            one.pad_token_id = pad


def _made_tokenizer(model_type: str, folder: pathlib.Path) -> Any:
    """The CTC tokenizer class transformers maps for ``model_type`` on a vocabulary of letters: vocab.json (in
    ``folder``) for a Wav2Vec2CTCTokenizer, a SentencePiece-style tokenizer for a tokenizers-backed one
    (Parakeet's)."""
    import transformers
    from transformers.models.auto import tokenization_auto
    from transformers.tokenization_utils_tokenizers import TokenizersBackend

    name = tokenization_auto.TOKENIZER_MAPPING_NAMES.get(model_type) or PROCESSOR_TOKENIZER
    cls = getattr(transformers, name)
    if issubclass(cls, TokenizersBackend):
        return cls(tokenizer_object=_sentencepiece_letters(), pad_token="<pad>", unk_token="<unk>")
    vocab = {token: i for i, token in enumerate(SPECIALS + ["|"] + LETTERS)}
    (folder / "vocab.json").write_text(json.dumps(vocab))
    return cls(str(folder / "vocab.json"))


def _sentencepiece_letters() -> Any:
    """A unigram tokenizer of the letters with SentencePiece's word boundary (Metaspace), as NeMo-converted
    CTC tokenizers are; the pad token is the blank."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    pieces = [("<pad>", 0.0), ("<unk>", 0.0), (WORD, -1.0)] + [(letter, -2.0) for letter in LETTERS]
    made = Tokenizer(models.Unigram(pieces, unk_id=1))
    made.pre_tokenizer = pre_tokenizers.Metaspace()
    made.decoder = decoders.Metaspace()
    return made


def _delimiter(tokenizer: Any) -> str:
    """The token that makes a space: the word delimiter of a Wav2Vec2CTCTokenizer, else SentencePiece's."""
    word: Optional[str] = getattr(tokenizer, "word_delimiter_token", None)
    return word if word is not None else WORD


def _features(extractor: Any) -> dict[str, Any]:
    """One second of noise through the feature extractor: the one tensor the model step takes."""
    import numpy as np

    from model_build.recipes.audio_steps import FEATURES

    rate = int(extractor.sampling_rate)
    wave = 0.1 * np.random.default_rng(0).standard_normal(rate).astype(np.float32)
    made = extractor([wave], sampling_rate=rate, return_tensors="pt")
    name = next(n for n in FEATURES if n in made)
    return {name: made[name]}
