"""Triton Python-backend model: text -> BERT token ids, the first step of a text ensemble.

Input ``TEXT`` (TYPE_STRING, one string per batch row); outputs ``input_ids`` and
``attention_mask`` padded to ``max_length``. WordPiece is implemented here with the standard
library and numpy only, so the model runs in the stock SageMaker Triton image without a packed
execution environment. ``vocab.txt`` sits next to this file.
"""
import json
import os
import unicodedata

import numpy as np
import triton_python_backend_utils as pb_utils


def _is_punctuation(char):
    cp = ord(char)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(char).startswith("P")


class WordPiece:
    """BERT's basic tokenizer (lower case, accents stripped, punctuation split) + greedy WordPiece."""

    def __init__(self, vocab_path, lower_case=True, max_chars_per_word=100):
        with open(vocab_path, encoding="utf-8") as fh:
            self.vocab = {line.rstrip("\n"): i for i, line in enumerate(fh) if line.rstrip("\n")}
        self.lower_case = lower_case
        self.max_chars = max_chars_per_word
        self.unk, self.cls, self.sep, self.pad = (self.vocab[t] for t in ("[UNK]", "[CLS]", "[SEP]", "[PAD]"))

    def _words(self, text):
        if self.lower_case:
            text = unicodedata.normalize("NFD", text.lower())
            text = "".join(c for c in text if unicodedata.category(c) != "Mn")
        words = []
        for chunk in text.split():
            current = ""
            for char in chunk:
                if _is_punctuation(char):
                    if current:
                        words.append(current)
                    words.append(char)
                    current = ""
                else:
                    current += char
            if current:
                words.append(current)
        return words

    def _pieces(self, word):
        if len(word) > self.max_chars:
            return [self.unk]
        ids, start = [], 0
        while start < len(word):
            end = len(word)
            while end > start:
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                if piece in self.vocab:
                    ids.append(self.vocab[piece])
                    break
                end -= 1
            if end == start:
                return [self.unk]
            start = end
        return ids

    def encode(self, text, max_length):
        ids = [self.cls]
        for word in self._words(text):
            ids.extend(self._pieces(word))
        ids = ids[: max_length - 1] + [self.sep]
        mask = [1] * len(ids) + [0] * (max_length - len(ids))
        return ids + [self.pad] * (max_length - len(ids)), mask


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        params = {k: v["string_value"] for k, v in config.get("parameters", {}).items()}
        here = os.path.join(args["model_repository"], args["model_version"])
        self.max_length = int(params.get("max_length", "128"))
        self.tokenizer = WordPiece(os.path.join(here, "vocab.txt"), params.get("lower_case", "true") == "true")
        out_type = pb_utils.get_output_config_by_name(config, "input_ids")["data_type"]
        self.dtype = pb_utils.triton_string_to_numpy(out_type)

    def execute(self, requests):
        responses = []
        for request in requests:
            texts = pb_utils.get_input_tensor_by_name(request, "TEXT").as_numpy().reshape(-1)
            rows = [self.tokenizer.encode(_as_str(t), self.max_length) for t in texts]
            ids = np.array([r[0] for r in rows], dtype=self.dtype)
            mask = np.array([r[1] for r in rows], dtype=self.dtype)
            responses.append(pb_utils.InferenceResponse(output_tensors=[
                pb_utils.Tensor("input_ids", ids), pb_utils.Tensor("attention_mask", mask)]))
        return responses

    def finalize(self):
        self.tokenizer = None


def _as_str(value):
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)
