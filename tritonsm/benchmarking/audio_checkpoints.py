"""Tiny audio checkpoints made offline for audio ``task:`` tests and benchmarks, each with its feature extractor.

For the tests (no hub access on the build machines): a transformers audio model at a few thousand parameters,
random weights (seed 0) saved with their head, and the feature extractor (and, for CTC, the character
tokenizer) its family ships with, at 16 kHz, saved together as ``save_pretrained`` writes a checkpoint.
Families: ``wav2vec2`` (group-normalised feature encoder, raw samples), ``hubert`` (layer-normalised), ``ast``
(a log-mel spectrogram of fixed length). A CTC head's weights are spread out so the transcript has letters,
word breaks and blanks, not one repeated token. Imports torch and transformers (build and tests only).
"""
from __future__ import annotations

import json
import pathlib
from typing import Any

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
        with torch.no_grad():  # a head that varies from frame to frame: letters, word breaks and blanks
            model.lm_head.weight.normal_(0, 1)
            model.lm_head.bias.zero_()
            model.lm_head.bias[vocab["<pad>"]] = 6.0
            model.lm_head.bias[vocab["|"]] = 2.0
    model.eval().save_pretrained(folder)
    return folder
