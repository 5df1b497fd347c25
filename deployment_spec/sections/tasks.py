"""``task:`` on a model: a checkpoint served for what applications send (raw text, encoded images) and want
(answers).

One spec entry with ``task`` and ``weights`` (a transformers ``save_pretrained`` or sentence-transformers
``save`` folder) becomes one Triton ensemble under the entry's own name, whose steps the loader adds
as models of their own, so endpoints, packaging, the local server and the CDK app treat them like any
ensemble (``models.<name>`` in the spec, the ensemble in Triton):

    <name>-tokenize   Python backend: the checkpoint's own ``tokenizer.json`` (Hugging Face tokenizers)
    <name>-preprocess Python backend, for images and audio: decoding and the checkpoint's own image processor
                      or feature extractor (``preprocessor_config.json``, through transformers); with
                      ``preprocess: dali``, a dali-backend model derived from that file (task_dali.py)
    <name>-model      the entry's backend (onnxruntime, tensorrt or pytorch): the checkpoint for its task
    <name>-answer     Python backend: labels and scores, entities, answer spans (not for embeddings,
                      whose pooling and normalisation are part of the model's graph)
    <name>            the ensemble: TEXT (and TEXT_PAIR), IMAGE or AUDIO in; the task's answer tensors out

Steps are wired by tensor name when the ensemble is built (the model step takes what its checkpoint
takes: RoBERTa no token_type_ids, BERT all three).
"""
from __future__ import annotations

import dataclasses
import enum
from typing import Mapping, Optional

from deployment_spec.parsing.errors import Problem, describe
from deployment_spec.parsing.parse import meta
from deployment_spec.sections.generation import Engine, Generation, engine_problems
from deployment_spec.sections.request_options import APPLIED_OPTIONS, OPTIONS, RequestOptions


class TaskKind(str, enum.Enum):
    TEXT_CLASSIFICATION = "text-classification"
    TOKEN_CLASSIFICATION = "token-classification"
    SENTENCE_EMBEDDING = "sentence-embedding"
    QUESTION_ANSWERING = "question-answering"
    IMAGE_CLASSIFICATION = "image-classification"
    OBJECT_DETECTION = "object-detection"
    IMAGE_EMBEDDING = "image-embedding"
    AUDIO_CLASSIFICATION = "audio-classification"
    SPEECH_RECOGNITION = "automatic-speech-recognition"
    TEXT_GENERATION = "text-generation"
    TEXT2TEXT_GENERATION = "text2text-generation"


IMAGE_KINDS = frozenset({TaskKind.IMAGE_CLASSIFICATION, TaskKind.OBJECT_DETECTION, TaskKind.IMAGE_EMBEDDING})
AUDIO_KINDS = frozenset({TaskKind.AUDIO_CLASSIFICATION, TaskKind.SPEECH_RECOGNITION})
# Kinds that generate text token by token: one Python-backend model (no ensemble) decoding with a key/value cache,
# the requests of the moment decoded together (model_build/python_models/generation_engine.py).
GENERATION_KINDS = frozenset({TaskKind.TEXT_GENERATION, TaskKind.TEXT2TEXT_GENERATION})
# automatic-speech-recognition generates too where the entry's backend is python: a sequence-to-sequence checkpoint
# (Whisper) decoded by the same engine, where onnxruntime, tensorrt or pytorch run a CTC checkpoint in an ensemble.
# The backend says which, as the user wrote it; the loader then checks the checkpoint's config.json agrees
# (task_models.speech_problems), so neither is guessed from a file alone.
GENERATING_TEXT = "text-generation, text2text-generation, or automatic-speech-recognition with backend python"


class Preprocess(str, enum.Enum):
    """Where an image task's first step runs the checkpoint's preprocessor_config.json."""

    PYTHON = "python"  # transformers' own image processor in a Python-backend step (any processor)
    DALI = "dali"      # a DALI pipeline derived from it (deployment_spec/sections/task_dali.py): nvJPEG and GPU resize


# Image kinds whose pixels DALI can make: one fixed size per batch. A detector's post-processing needs each image's
# own size and its processors keep the aspect ratio (longest_edge), which no fixed-size pipeline expresses.
DALI_KINDS = frozenset({TaskKind.IMAGE_CLASSIFICATION, TaskKind.IMAGE_EMBEDDING})


class Aggregation(str, enum.Enum):
    """transformers' TokenClassificationPipeline aggregation strategies."""

    NONE = "none"
    SIMPLE = "simple"
    FIRST = "first"
    AVERAGE = "average"
    MAX = "max"


@dataclasses.dataclass(frozen=True)
class Task:
    """What the served ensemble takes and answers."""

    kind: TaskKind = dataclasses.field(metadata=meta(help=", ".join(k.value for k in TaskKind)))
    top_k: int = dataclasses.field(default=1, metadata=meta(
        minimum=1, maximum=1000, help="labels (text-classification) or answers (question-answering) per row"))
    text_pair: bool = dataclasses.field(default=False, metadata=meta(
        help="text-classification: every request carries TEXT_PAIR too (NLI, cross-encoder rerankers)"))
    aggregation: Aggregation = Aggregation.SIMPLE
    max_answer_length: int = dataclasses.field(default=15, metadata=meta(
        minimum=1, maximum=512, help="question-answering: the longest answer, in tokens"))
    doc_stride: Optional[int] = dataclasses.field(default=None, metadata=meta(
        minimum=0, maximum=4096, help="question-answering: context tokens each window repeats from the one before, "
                                      "for a context longer than one window (the pipeline's doc_stride; default "
                                      "its own, min(sequence_length / 2, 128); 0: windows that do not overlap)"))
    max_windows: int = dataclasses.field(default=16, metadata=meta(
        minimum=1, maximum=256, help="question-answering: the most windows a context may take; a longer one is "
                                     "refused with a 400"))
    max_image_bytes: int = dataclasses.field(default=20_000_000, metadata=meta(
        minimum=1024, maximum=1_000_000_000, help="image tasks: the largest encoded image a request may send"))
    max_image_pixels: int = dataclasses.field(default=40_000_000, metadata=meta(
        minimum=1, maximum=1_000_000_000, help="image tasks: the most pixels (width x height) an image may have"))

    threshold: float = dataclasses.field(default=0.5, metadata=meta(
        minimum=0, maximum=1, help="object-detection: the lowest score a detection is answered with (the "
                                   "pipeline's default 0.5)"))
    normalize: bool = dataclasses.field(default=False, metadata=meta(
        help="image-embedding: L2-normalise each embedding inside the graph (for cosine search)"))
    max_audio_seconds: int = dataclasses.field(default=30, metadata=meta(
        minimum=1, maximum=3600, help="audio tasks: the longest clip a request may send, in seconds"))
    preprocess: Preprocess = dataclasses.field(default=Preprocess.PYTHON, metadata=meta(
        help="image-classification, image-embedding: python (transformers' image processor in a Python step) or "
             "dali (a DALI pipeline derived from preprocessor_config.json, on the GPU where the endpoint has one; "
             "requests then send IMAGE as UINT8 bytes)"))
    requests: RequestOptions = dataclasses.field(default_factory=RequestOptions, metadata=meta(
        help="the options a request may send as parameters beside inputs (top_k, function_to_apply, "
             "aggregation_strategy, max_answer_len, handle_impossible_answer, doc_stride, threshold: pipeline()'s per call), and "
             "the bound of each"))
    generation: Generation = dataclasses.field(default_factory=Generation, metadata=meta(
        help="text-generation, text2text-generation, automatic-speech-recognition with backend python (Whisper): the "
             "bounds of what a request may ask (max_new_tokens, "
             "temperature, top_k, repetition_penalty, stop strings, prompt length)"))
    stream: bool = dataclasses.field(default=True, metadata=meta(
        help="text-generation, text2text-generation, automatic-speech-recognition with backend python: answer token "
             "by token (InvokeEndpointWithResponseStream; "
             "single-model endpoints and inference components, Triton 25.03 or later); false: the whole text at once"))
    # The loader sets it (ModelSpec.__post_init__): automatic-speech-recognition with backend python, a Whisper
    # checkpoint decoded token by token (GENERATION_KINDS' comment).
    speech_seq2seq: bool = dataclasses.field(default=False, metadata=meta(yaml=False))
    engine: Engine = dataclasses.field(default=Engine.TRANSFORMERS, metadata=meta(
        help="text-generation, text2text-generation: transformers (our Python-backend engine, any host), vllm "
             "(Triton's vLLM backend) or tensorrt-llm (TensorRT-LLM's LLM-API model); the last two on GPU "
             "instance types, from NVIDIA's image mirrored into endpoints.<e>.image_repository"))

    def takes_image(self) -> bool:
        return self.kind in IMAGE_KINDS

    def takes_audio(self) -> bool:
        return self.kind in AUDIO_KINDS

    def dali_preprocess(self) -> bool:
        return self.preprocess is Preprocess.DALI

    def generates(self) -> bool:
        return self.kind in GENERATION_KINDS or self.speech_seq2seq

    def model_recipe(self) -> str:
        return GENERATE_RECIPE if self.generates() else MODEL_RECIPE[self.kind]

    def streams(self) -> bool:
        return self.generates() and self.stream

    def takes_pair(self) -> bool:
        return self.kind is TaskKind.QUESTION_ANSWERING or (
            self.kind is TaskKind.TEXT_CLASSIFICATION and self.text_pair)

    def entry_problems(self, path: str) -> list[Problem]:
        """Checked by the entry (ModelSpec._task_problems), not when the task alone parses: whether a speech task
        generates depends on the entry's backend (speech_seq2seq)."""
        out = []
        if self.text_pair and self.kind is not TaskKind.TEXT_CLASSIFICATION:
            what = ("always takes TEXT (question) and TEXT_PAIR (context)"
                    if self.kind is TaskKind.QUESTION_ANSWERING else
                    "takes one image per row" if self.takes_image() else
                    "takes one clip per row" if self.takes_audio() else "takes one text per row")
            out.append(Problem(f"{path}.text_pair", "true", f"false for {self.kind.value} (it {what})",
                               "remove text_pair"))
        if self.top_k != 1 and self.kind not in TOP_K_KINDS:
            out.append(Problem(f"{path}.top_k", str(self.top_k), "only with " + ", ".join(
                k.value for k in TaskKind if k in TOP_K_KINDS), "remove top_k"))
        defaults = Task(self.kind)
        if self.normalize and self.kind is not TaskKind.IMAGE_EMBEDDING:
            out.append(Problem(f"{path}.normalize", "true", "only with image-embedding (sentence-embedding "
                               "normalises as its sentence-transformers modules say)", "remove normalize"))
        for key in ("doc_stride", "max_windows"):
            if getattr(self, key) != getattr(defaults, key) and self.kind is not TaskKind.QUESTION_ANSWERING:
                out.append(Problem(f"{path}.{key}", str(getattr(self, key)), "only with question-answering",
                                   f"remove {key}"))
        if self.threshold != defaults.threshold and self.kind is not TaskKind.OBJECT_DETECTION:
            out.append(Problem(f"{path}.threshold", str(self.threshold), "only with object-detection",
                               "remove threshold"))
        for keys, kinds, takes in ((("max_image_bytes", "max_image_pixels"), IMAGE_KINDS, self.takes_image()),
                                   (("max_audio_seconds",), AUDIO_KINDS, self.takes_audio())):
            for key in keys:
                if not takes and getattr(self, key) != getattr(defaults, key):
                    what = "an image" if kinds is IMAGE_KINDS else "an audio"
                    out.append(Problem(f"{path}.{key}", str(getattr(self, key)), f"only with {what} task ("
                                       + ", ".join(sorted(k.value for k in kinds)) + ")", f"remove {key}"))
        if self.dali_preprocess() and self.kind not in DALI_KINDS:
            why = (" (a detector needs each image's own size, which a fixed-size DALI pipeline does not keep)"
                   if self.kind is TaskKind.OBJECT_DETECTION else "")
            out.append(Problem(f"{path}.preprocess", f"'dali' with {self.kind.value}{why}",
                               "dali only with " + ", ".join(k.value for k in TaskKind if k in DALI_KINDS)
                               + "; python with every kind", "remove preprocess (python, the default)"))
        own = {"top_k": self.top_k, "max_answer_len": self.max_answer_length, "threshold": self.threshold,
               "aggregation_strategy": self.aggregation.value}
        return out + self.requests.task_problems(f"{path}.requests", self.kind.value, own) + \
            self._generation_problems(path, defaults)

    def _generation_problems(self, path: str, defaults: "Task") -> list[Problem]:
        if self.generates():
            out = self.generation.problems(f"{path}.generation") + engine_problems(
                self.engine, self.kind.value, self.stream, self.generation, path)
            if self.generation.languages is not None and not self.speech_seq2seq:
                out.append(Problem(f"{path}.generation.languages", ", ".join(self.generation.languages) or "[]",
                                   "only with automatic-speech-recognition on a Whisper (a request's "
                                   f"parameters.language); {self.kind.value} takes none", "remove languages"))
            return out
        out = []
        kinds = GENERATING_TEXT
        if self.generation != defaults.generation:
            out.append(Problem(f"{path}.generation", "generation settings", f"only with {kinds}",
                               "remove generation"))
        if self.stream != defaults.stream:
            out.append(Problem(f"{path}.stream", str(self.stream).lower(), f"only with {kinds} (a "
                               f"{self.kind.value} answers in one piece)", "remove stream"))
        if self.engine is not defaults.engine:
            out.append(Problem(f"{path}.engine", repr(self.engine.value), f"only with {kinds}", "remove engine"))
        return out


TOP_K_KINDS = frozenset({TaskKind.TEXT_CLASSIFICATION, TaskKind.QUESTION_ANSWERING, TaskKind.IMAGE_CLASSIFICATION,
                         TaskKind.AUDIO_CLASSIFICATION})


# The ensemble's outputs per task (what an application reads), and whether an answer step makes them.
_ANSWERS: Mapping[TaskKind, tuple[str, ...]] = {
    TaskKind.TEXT_CLASSIFICATION: ("labels", "scores"),
    TaskKind.TOKEN_CLASSIFICATION: ("entities",),
    TaskKind.SENTENCE_EMBEDDING: ("sentence_embedding",),
    TaskKind.QUESTION_ANSWERING: ("answers",),
    TaskKind.IMAGE_CLASSIFICATION: ("labels", "scores"),
    TaskKind.OBJECT_DETECTION: ("detections",),
    TaskKind.IMAGE_EMBEDDING: ("image_embedding",),
    TaskKind.AUDIO_CLASSIFICATION: ("labels", "scores"),
    TaskKind.SPEECH_RECOGNITION: ("text",),
    TaskKind.TEXT_GENERATION: ("text_output",),
    TaskKind.TEXT2TEXT_GENERATION: ("text_output",),
}
# What each task's ensemble answers: its answers, and where a request may send options, the ones it applied.
OUTPUTS: Mapping[TaskKind, tuple[str, ...]] = {
    kind: answers + ((APPLIED_OPTIONS,) if OPTIONS.get(kind.value) else ()) for kind, answers in _ANSWERS.items()}
TEXT, TEXT_PAIR, IMAGE, AUDIO = "TEXT", "TEXT_PAIR", "IMAGE", "AUDIO"
STEP_SUFFIXES = ("-tokenize", "-model", "-answer")
PREPROCESS_SUFFIX = "-preprocess"  # an image or audio task's first step
# The recipe of each step (deployment_spec.sections.recipes lists them; model_build implements them).
TOKENIZE_RECIPE, ANSWER_RECIPE, IMAGE_RECIPE, AUDIO_RECIPE = ("hf-tokenize", "hf-answer", "hf-image-preprocess",
                                                             "hf-audio-preprocess")
GENERATE_RECIPE = "hf-generate"
MODEL_RECIPE: Mapping[TaskKind, str] = {
    TaskKind.TEXT_CLASSIFICATION: "hf-sequence-classification",
    TaskKind.TOKEN_CLASSIFICATION: "hf-token-classification",
    TaskKind.SENTENCE_EMBEDDING: "hf-sentence-embedding",
    TaskKind.QUESTION_ANSWERING: "hf-question-answering",
    TaskKind.IMAGE_CLASSIFICATION: "hf-image-classification",
    TaskKind.OBJECT_DETECTION: "hf-object-detection",
    TaskKind.IMAGE_EMBEDDING: "hf-image-embedding",
    TaskKind.AUDIO_CLASSIFICATION: "hf-audio-classification",
    TaskKind.SPEECH_RECOGNITION: "hf-ctc",
    TaskKind.TEXT_GENERATION: GENERATE_RECIPE,
    TaskKind.TEXT2TEXT_GENERATION: GENERATE_RECIPE,
}


def first_recipe(kind: TaskKind) -> str:
    """The recipe of the step that turns what the application sends into the model's tensors."""
    return IMAGE_RECIPE if kind in IMAGE_KINDS else AUDIO_RECIPE if kind in AUDIO_KINDS else TOKENIZE_RECIPE


def has_answer_step(kind: TaskKind) -> bool:
    """Embeddings have none: the model's graph pools and normalises."""
    return kind not in (TaskKind.SENTENCE_EMBEDDING, TaskKind.IMAGE_EMBEDDING)


def step_suffixes(task: Task) -> tuple[str, ...]:
    if task.generates():
        return ()  # one model under the entry's own name
    kind = task.kind
    first = PREPROCESS_SUFFIX if kind in IMAGE_KINDS | AUDIO_KINDS else STEP_SUFFIXES[0]
    suffixes = (first, *STEP_SUFFIXES[1:])
    return suffixes if has_answer_step(kind) else suffixes[:2]


def step_names(name: str, task: Task) -> tuple[str, ...]:
    return tuple(name + suffix for suffix in step_suffixes(task))


def name_problems(name: str, task: Task, declared: set[str], max_length: int) -> list[Problem]:
    """The step names must be free and valid Triton names too."""
    out: list[Problem] = []
    suffixes = step_suffixes(task)
    if not suffixes:
        return out
    longest = max(len(s) for s in suffixes)
    if len(name) + longest > max_length:
        out.append(Problem(f"models.{name}", f"the name {describe(name)} ({len(name)} characters)",
                           f"at most {max_length - longest} characters with task (its steps are named "
                           f"{name}{suffixes[0]} and so on)", "shorten the name"))
    for step in step_names(name, task):
        if step in declared:
            out.append(Problem(f"models.{step}", "a model declared by hand",
                               f"no model of this name: models.{name}.task adds it as a step",
                               f"rename models.{step}, or remove task from models.{name}"))
    return out
