"""Triton Python-backend model: raw text -> the token tensors of the checkpoint's own tokenizer.

The first step of a ``task:`` ensemble (deployment_spec/sections/tasks.py). ``tokenizer.json`` (Hugging Face
``tokenizers``: WordPiece, BPE, byte-level BPE, Unigram, with the checkpoint's normalizer,
pre-tokenizer and special-token template) sits next to this file; config.pbtxt parameters carry
what transformers keeps in tokenizer_config.json: ``max_length``, ``truncation_side``,
``padding_side``, ``pad_id``, ``pair`` ("none" or "required") and ``truncation`` (the pair strategy).

Inputs ``TEXT`` (and ``TEXT_PAIR`` where the task takes pairs), BYTES, one UTF-8 string per row.
Outputs, [rows, tokens]: ``input_ids``, ``attention_mask``, ``token_type_ids``, ``word_ids`` (-1: special or
padding), ``sequence_ids`` (-1 special or padding, 0 first text, 1 second) and ``offsets``
[rows, tokens, 2] (character start and end in the row's own text). Rows are padded to the longest
row of the request rounded up to a power of two (at least 16, at most ``max_length``): requests of
similar length then share a shape, which Triton's dynamic batcher needs to batch them, while a short
text does not pay for ``max_length`` tokens.

A bad row (empty, not UTF-8, a missing pair) fails its own request with a 400 naming the input and row;
the other requests of the batch are answered.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # step_requests.py ships beside this file
from step_requests import RequestError, answer_requests  # noqa: E402

import numpy as np

try:  # absent when the build imports this file to verify the ensemble (model_build/backends/ensemble)
    import triton_python_backend_utils as pb_utils
except ImportError:
    pb_utils = None

MIN_BUCKET = 16


class Tokenize:
    """The checkpoint's tokenizer with the parameters of config.pbtxt; no Triton types."""

    def __init__(self, tokenizer_path, params):
        from tokenizers import Tokenizer  # the execution environment's tokenizers

        self.tokenizer = Tokenizer.from_file(tokenizer_path)
        self.max_length = int(params["max_length"])
        self.pair = params.get("pair", "none")
        self.pad_id = int(params.get("pad_id", "0"))
        self.left_pad = params.get("padding_side", "right") == "left"
        # Padding is ours (to a bucket); truncation is the tokenizer's, so pairs are cut as transformers cuts them.
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(self.max_length, strategy=params.get("truncation", "longest_first"),
                                         direction=params.get("truncation_side", "right"))

    def encode(self, texts, pairs=None):
        """Raw rows (bytes or str) -> {output name: array}; RequestError on a bad row."""
        first = [_text(t, "TEXT", i) for i, t in enumerate(texts)]
        if self.pair == "required":
            if pairs is None:
                raise RequestError("TEXT_PAIR is missing; this model takes a pair of texts per row (TEXT and "
                                   "TEXT_PAIR)")
            if len(pairs) != len(first):
                raise RequestError(f"TEXT has {len(first)} rows but TEXT_PAIR has {len(pairs)}; send one "
                                   "TEXT_PAIR per TEXT row")
            second = [_text(t, "TEXT_PAIR", i) for i, t in enumerate(pairs)]
            encodings = self.tokenizer.encode_batch(list(zip(first, second)))
        else:
            if pairs is not None:
                raise RequestError("TEXT_PAIR was sent, but this model takes one text per row; send TEXT only")
            encodings = self.tokenizer.encode_batch(first)
        return self._arrays(encodings)

    def _arrays(self, encodings):
        longest = max(len(e.ids) for e in encodings)
        width = min(self.max_length, max(MIN_BUCKET, 1 << (longest - 1).bit_length()))
        rows = len(encodings)
        out = {
            "input_ids": np.full((rows, width), self.pad_id, dtype=np.int64),
            "attention_mask": np.zeros((rows, width), dtype=np.int64),
            "token_type_ids": np.zeros((rows, width), dtype=np.int64),
            "word_ids": np.full((rows, width), -1, dtype=np.int64),
            "sequence_ids": np.full((rows, width), -1, dtype=np.int64),
            "offsets": np.zeros((rows, width, 2), dtype=np.int64),
        }
        for row, enc in enumerate(encodings):
            n = len(enc.ids)
            cols = slice(width - n, width) if self.left_pad else slice(0, n)
            out["input_ids"][row, cols] = enc.ids
            out["attention_mask"][row, cols] = enc.attention_mask
            out["token_type_ids"][row, cols] = enc.type_ids
            out["word_ids"][row, cols] = [-1 if w is None else w for w in enc.word_ids]
            out["sequence_ids"][row, cols] = [-1 if s is None else s for s in enc.sequence_ids]
            out["offsets"][row, cols] = enc.offsets
            special = np.asarray(enc.special_tokens_mask, dtype=bool)
            # Special tokens belong to no word and no text (transformers' word_ids/sequence_ids say None too).
            out["word_ids"][row, cols][special] = -1
            out["sequence_ids"][row, cols][special] = -1
        return out


def _text(value, name, row):
    if isinstance(value, bytes):
        try:
            value = value.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise RequestError(f"{name} row {row} is not UTF-8 text (byte 0x{value[exc.start]:02x} at position "
                               f"{exc.start}); send the text encoded as UTF-8") from None
    text = str(value)
    if not text.strip():
        raise RequestError(f"{name} row {row} is empty; send at least one character that is not a space")
    return text


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        params = {k: v["string_value"] for k, v in config.get("parameters", {}).items()}
        here = os.path.join(args["model_repository"], args["model_version"])
        self.step = Tokenize(os.path.join(here, "tokenizer.json"), params)
        self.outputs = {o["name"]: pb_utils.triton_string_to_numpy(o["data_type"]) for o in config["output"]}

    def execute(self, requests):
        def compute(request):
            texts = pb_utils.get_input_tensor_by_name(request, "TEXT")
            pairs = pb_utils.get_input_tensor_by_name(request, "TEXT_PAIR")
            arrays = self.step.encode(texts.as_numpy().reshape(-1),
                                      None if pairs is None else pairs.as_numpy().reshape(-1))
            return [pb_utils.Tensor(name, arrays[name].astype(dtype)) for name, dtype in self.outputs.items()]

        return answer_requests(pb_utils, requests, compute)
