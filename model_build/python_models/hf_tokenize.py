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

A bad row (empty, not UTF-8, a missing pair, a question that leaves the context no room) fails its own request
with a 400 naming the input and row; the other requests of the batch are answered.

A text far longer than ``max_length`` tokens can hold is cut before it is tokenized (``cut_before_tokenizing``):
tokenizing all of a 5 MB text to keep its first 512 tokens took seconds.

Question answering (parameters ``doc_stride`` and ``max_windows``): a context longer than one window is cut into
overlapping windows, as transformers' QA pipeline cuts it (its tokenizer call with ``stride=doc_stride,
return_overflowing_tokens=True``: each window holds the whole question and repeats the last ``doc_stride`` context
tokens of the window before). The first window of each row goes out in the tensors above, for the ensemble's model
step; the others in ``window_*`` tensors [rows, windows, tokens] (``window_offsets`` [rows, windows, tokens, 2]) with
``window_count`` [rows, 1] saying how many of them each row has: the answer step runs the model on them itself
(hf_answer.py). A context of more than ``max_windows`` windows is refused with a 400.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # step_requests.py ships beside this file
from step_requests import RequestError, answer_requests, parameter_number  # noqa: E402

import numpy as np

try:  # absent when the build imports this file to verify the ensemble (model_build/backends/ensemble)
    import triton_python_backend_utils as pb_utils
except ImportError:
    pb_utils = None

MIN_BUCKET = 16
# A text is cut at the first whitespace after max(CUT_MIN_CHARS, max_length x CUT_CHARS_PER_TOKEN) characters, and
# the cut is kept only where the part kept holds CUT_MARGIN_TOKENS more tokens than max_length: the tokens kept
# after truncation then lie well before the cut, so they are the uncut text's (else the whole text is tokenized).
CUT_CHARS_PER_TOKEN = 16
CUT_MIN_CHARS = 4096
CUT_MARGIN_TOKENS = 16
# A question-answering row's windows after its first: these tensors, named window_<name>.
WINDOW_TENSORS = ("input_ids", "attention_mask", "token_type_ids", "word_ids", "sequence_ids", "offsets")


class Tokenize:
    """The checkpoint's tokenizer with the parameters of config.pbtxt; no Triton types."""

    def __init__(self, tokenizer_path, params):
        from tokenizers import Tokenizer  # the execution environment's tokenizers

        self.tokenizer = Tokenizer.from_file(tokenizer_path)
        self.counter = Tokenizer.from_file(tokenizer_path)  # no truncation, no padding: counts a text's tokens
        self.counter.no_truncation()
        self.counter.no_padding()
        self.max_length = int(params["max_length"])
        self.strategy = params.get("truncation", "longest_first")
        self.cuts_the_end = params.get("truncation_side", "right") == "right"
        self.pair = params.get("pair", "none")
        self.pad_id = int(params.get("pad_id", "0"))
        self.left_pad = params.get("padding_side", "right") == "left"
        # Question answering's windows (only its step has these parameters); a request may send its own doc_stride.
        self.windows = "doc_stride" in params
        self.default_stride = int(params.get("doc_stride", "0"))
        self.stride = self.default_stride  # this request's
        self.max_stride = int(params.get("max_doc_stride", "0"))
        self.max_windows = int(params.get("max_windows", "1"))
        self.direction = params.get("truncation_side", "right")
        # Padding is ours (to a bucket); truncation is the tokenizer's, so pairs are cut as transformers cuts them.
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(self.max_length, stride=self.stride, strategy=self.strategy,
                                         direction=self.direction)

    def _use_request_stride(self, parameters):
        """A request's ``doc_stride`` (the pipeline's per-call option) where it is an integer this model can take,
        for this request only; anything else is left to the answer step, which refuses it naming the bound."""
        number = parameter_number(parameters.get("doc_stride"))  # read as the answer step reads it
        self.stride = self.default_stride
        if number is not None and number.is_integer() and 0 <= number <= self.max_stride:
            self.stride = int(number)
        self.tokenizer.enable_truncation(self.max_length, stride=self.stride, strategy=self.strategy,
                                         direction=self.direction)

    def encode(self, texts, pairs=None, parameters=None):
        """Raw rows (bytes or str) -> {output name: array}; RequestError on a bad row. ``parameters``: the
        request's (KServe v2), read for question answering's ``doc_stride``."""
        if self.windows:
            self._use_request_stride(parameters or {})
        first = [_text(t, "TEXT", i) for i, t in enumerate(texts)]
        if self.pair == "required":
            if pairs is None:
                raise RequestError("TEXT_PAIR is missing; this model takes a pair of texts per row (TEXT and "
                                   "TEXT_PAIR)")
            if len(pairs) != len(first):
                raise RequestError(f"TEXT has {len(first)} rows but TEXT_PAIR has {len(pairs)}; send one "
                                   "TEXT_PAIR per TEXT row")
            second = [_text(t, "TEXT_PAIR", i) for i, t in enumerate(pairs)]
            cut = [False] * len(second)
            if self.strategy == "only_second":   # only the second text is cut, so only it can be cut early
                kept = [self.cut_before_tokenizing(t) for t in second]
                cut = [len(k) < len(t) for k, t in zip(kept, second)]
                second = kept
            if self.windows:  # tokenizers panics (no exception) on a question that leaves no room for the stride
                self._refuse_questions_without_room(first)
            try:
                encodings = self.tokenizer.encode_batch(list(zip(first, second)))
            except Exception as error:  # tokenizers raises a bare Exception
                if "Truncation error" not in str(error):
                    raise
                raise self._no_room_for_the_pair(first) from None
            if self.windows:
                return self._window_arrays(encodings, cut)
        else:
            if pairs is not None:
                raise RequestError("TEXT_PAIR was sent, but this model takes one text per row; send TEXT only")
            encodings = self.tokenizer.encode_batch([self.cut_before_tokenizing(t) for t in first])
        return self._arrays(encodings)

    def cut_before_tokenizing(self, text):
        """``text``, or a prefix of it whose tokens after truncation are the whole text's: cut at a whitespace far
        enough past what ``max_length`` tokens can hold (a cut at a word boundary keeps the words before it
        tokenized as they were). Only where truncation keeps the beginning (``truncation_side`` right)."""
        budget = self.max_length * self.max_windows  # the tokens that can be read: every window's
        limit = max(CUT_MIN_CHARS, budget * CUT_CHARS_PER_TOKEN)
        if not self.cuts_the_end or len(text) <= limit:
            return text
        space = next((i for i in range(limit, min(len(text), limit + 1000)) if text[i].isspace()), None)
        if space is None:  # no word boundary near the limit: tokenize it whole
            return text
        kept = text[:space]
        if len(self.counter.encode(kept, add_special_tokens=False).ids) < budget + CUT_MARGIN_TOKENS:
            return text
        return kept

    def _special_tokens(self):
        return self.counter.post_processor.num_special_tokens_to_add(True) if self.counter.post_processor else 0

    def _refuse_questions_without_room(self, first):
        """Each window repeats ``doc_stride`` context tokens of the one before, so a question must leave the context
        more than that in ``max_length`` tokens (transformers' call panics in tokenizers otherwise)."""
        room = self.max_length - self._special_tokens() - self.stride - 1
        found = self._longer_than(first, room)
        if found:
            row, count = found
            raise RequestError(
                f"TEXT row {row} is {count} tokens; this model reads {self.max_length} tokens per window (its "
                f"sequence_length) and repeats {self.stride} context tokens from one window to the next "
                f"({self._stride_source()}), so TEXT must leave TEXT_PAIR more than {self.stride}: send a TEXT of at "
                f"most {room} tokens")

    def _longer_than(self, texts, room):
        """The first row whose text has more than ``room`` tokens (no special tokens): (row, tokens), else None."""
        for row, text in enumerate(texts):
            count = len(self.counter.encode(text, add_special_tokens=False).ids)
            if count > room:
                return row, count
        return None

    def _stride_source(self):
        return "task.doc_stride" if self.stride == self.default_stride else "the request's doc_stride"

    def _window_arrays(self, encodings, cut):
        """The first window of each row in the usual tensors, the others in ``window_*`` ones."""
        extra = [list(e.overflowing) for e in encodings]
        for row, more in enumerate(extra):
            if len(more) + 1 > self.max_windows:
                needs = f"more than {self.max_windows}" if cut[row] else str(len(more) + 1)
                raise RequestError(
                    f"TEXT_PAIR row {row} needs {needs} windows of {self.max_length} tokens (overlapping by "
                    f"{self.stride}); this model reads at most {self.max_windows} per row (task.max_windows): send a "
                    "shorter TEXT_PAIR, or raise task.max_windows in the spec")
        out = self._arrays(encodings)
        flat = [e for more in extra for e in more]
        # A request without extra windows still sends the tensors (Triton wants each declared output): one padding
        # token each, which window_count (0) says to skip.
        made = self._arrays(flat) if flat else None
        shape = (len(encodings), max(1, max(len(more) for more in extra)), made["input_ids"].shape[1] if made else 1)
        rows = [row for row, more in enumerate(extra) for _ in more]
        places = [k for more in extra for k in range(len(more))]
        fills = {"input_ids": self.pad_id, "word_ids": -1, "sequence_ids": -1}
        for name in WINDOW_TENSORS:
            tail = (2,) if name == "offsets" else ()
            out["window_" + name] = np.full(shape + tail, fills.get(name, 0), np.int64)
            if made:
                out["window_" + name][rows, places] = made[name]
        out["window_count"] = np.array([[len(more)] for more in extra], dtype=np.int64)
        return out

    def _no_room_for_the_pair(self, first):
        """The row whose first text (a question) leaves the second none of ``max_length``: tokenizers refuses it
        ("Truncation error: Sequence to truncate too short to respect the provided max_length"), and so does
        transformers' own tokenizer call with ``truncation="only_second"``."""
        room = self.max_length - self._special_tokens() - 1
        found = self._longer_than(first, room)
        if found:
            row, count = found
            return RequestError(
                f"TEXT row {row} is {count} tokens; this model reads at most {self.max_length} tokens per row "
                f"(its sequence_length) and cuts only TEXT_PAIR to fit, so TEXT must leave it room: send a "
                f"TEXT of at most {room} tokens")
        return RequestError(f"a row's TEXT leaves TEXT_PAIR no room within {self.max_length} tokens; send a "
                            "shorter TEXT")

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
                                      None if pairs is None else pairs.as_numpy().reshape(-1),
                                      json.loads(request.parameters() or "{}"))
            return [pb_utils.Tensor(name, arrays[name].astype(dtype)) for name, dtype in self.outputs.items()]

        return answer_requests(pb_utils, requests, compute)
