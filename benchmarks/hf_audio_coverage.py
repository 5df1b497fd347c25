"""Which transformers audio classifiers and CTC speech recognisers an audio `task:` entry serves from audio files:
built, verified, served, refused.

    .venv/bin/python benchmarks/hf_audio_coverage.py --task audio-classification|automatic-speech-recognition
        [--only wav2vec2,hubert] [--limit N] [--batch 8] [--work /tmp/hf_audio_coverage] [--fresh] [--keep-builds]

Every model type the pinned transformers (5.23.0) maps for the task (transformers.models.auto.modeling_auto:
MODEL_FOR_AUDIO_CLASSIFICATION_MAPPING_NAMES, or MODEL_FOR_CTC_MAPPING_NAMES for automatic-speech-recognition,
the product's CTC kind; the first class of a tuple of variants) gets a tiny random checkpoint made offline from its
own config (benchmarks/tooling/audio_checkpoints.py, ``save_mapped``: tiny_checkpoints.py's shrunk sizes, the
convolutional feature encoder narrowed to 32 channels with its kernels and strides kept, seed 0, checked to run
eagerly on the feature extractor's output, ``save_pretrained``) and, beside it, the feature extractor
transformers maps for that model type (models/auto/feature_extraction_auto.py; wav2vec2-bert: the one its
config documents, see audio_checkpoints.DOCUMENTED_EXTRACTORS) at its default settings, 3 labels (speech, music,
noise) for a classifier, and for CTC the tokenizer class transformers maps (models/auto/tokenization_auto.py;
Wav2Vec2CTCTokenizer where it maps none) on a vocabulary of letters, the head spread so that the transcript has
letters, word breaks and blanks. An architecture that does not instantiate that way is listed as not
instantiable with its reason, and one whose feature extractor cannot be made here as "no feature extractor";
neither is counted in the share.

The checkpoints are built in batches (one spec per batch, one ``task: {kind: audio-classification, top_k: 2}`` or
``task: {kind: automatic-speech-recognition}`` entry per checkpoint, backend onnxruntime, max_batch_size 4,
Triton 25.09) by the real `tritonsm build --python-env-for local`, which verifies each ensemble, WAV and FLAC
files in, labels or a transcript out, against transformers' pipeline of the task on the same clips; then the
built ones are packed as one multi-model endpoint, served on the local Triton server with CPU stand-ins
(`tritonsm serve ENDPOINT --cpu-stand-in`) and each answers one WAV written here (1.5 s, 16-bit PCM, a gliding
harmonic voice under noise, at the feature extractor's sampling rate) sent with `tritonsm invoke --endpoint
ENDPOINT --model NAME --audio FILE`: a classifier's answer must be top_k labels of the checkpoint with finite
scores that agree with pipeline('audio-classification') on the same file (same labels, scores within 1e-3), a
CTC model's the pipeline('automatic-speech-recognition') transcript, character for character (the pipeline is
handed the file as scipy reads it, ``{"raw": waveform, "sampling_rate": rate}``: its own file reader needs an
ffmpeg binary). Every ONNX refusal is tried again as the same entry with backend pytorch (the pytorch way out).
Tracebacks in any command's output count against the model they came with (the server's: every model it served).

Resumable: results accumulate in <work>/<task>/results.json and an architecture with a result is not run again
(`--fresh` forgets them). A recorded batch keeps its spec, command log and checkpoints; its build cache and
tarballs are removed unless `--keep-builds`. `--limit N` runs at most N architectures not run before. Writes
benchmarks/hf_audio_classification_coverage.{json,md} or benchmarks/hf_ctc_coverage.{json,md} after every batch.

The run itself (batches, builds, the pytorch way out, resuming, serving, judging labels against a pipeline, the
reports' common parts) is benchmarks/tooling/coverage_runs.py, shared with benchmarks/hf_image_coverage.py and
hf_task_coverage.py; here: the rows, their checkpoints and spec entries, the WAV, how a transcript is judged, the
summary.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import pathlib
import sys
from typing import Any, Callable

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.tooling import audio_checkpoints, coverage_runs, tiny_checkpoints  # noqa: E402
from benchmarks.tooling.coverage_runs import (BACKENDS, FLAT_NOTE, NOT_INSTANTIABLE, SERVED,  # noqa: E402
                                                 TRITON_VERSION, Row, architectures, cell, entry_name, mapped)

MAX_BATCH, TOP_K = 4, 2
NO_EXTRACTOR = "no feature extractor"
SAMPLE_SECONDS = 1.5
EMPTY_NOTE = "the transcript is empty: a weak check"


@dataclasses.dataclass(frozen=True)
class AudioTask:
    """What differs between the two audio tasks."""
    kind: str  # the spec's task.kind and the pipeline's task
    mapping: str  # the transformers.models.auto.modeling_auto mapping of its model classes
    prefix: str  # of the entry names
    stem: str  # of the reports
    entry: str  # the spec's task: value
    title: str  # what the report is about


TASKS = {t.kind: t for t in (
    AudioTask("audio-classification", "MODEL_FOR_AUDIO_CLASSIFICATION_MAPPING_NAMES", "snd",
              "hf_audio_classification_coverage", f"{{kind: audio-classification, top_k: {TOP_K}}}",
              "Audio classification from audio files"),
    AudioTask("automatic-speech-recognition", "MODEL_FOR_CTC_MAPPING_NAMES", "asr", "hf_ctc_coverage",
              "{kind: automatic-speech-recognition}", "CTC speech recognition from audio files"),
)}


# --- what to run -------------------------------------------------------------------------------------------



def make_checkpoint(row: Row, folder: pathlib.Path) -> None:
    """The row's model, feature extractor (and tokenizer) in ``folder``; NotInstantiable or NoFeatureExtractor
    where they cannot be made."""
    from transformers.utils import logging

    logging.disable_progress_bar()  # type: ignore[no-untyped-call]  # "Writing model shards" per checkpoint
    row["weights"] = str(folder)
    row.update(audio_checkpoints.save_mapped(row["model_type"], row["class"], folder))


# --- build and serve (benchmarks/tooling/coverage_runs.py; here: the spec, the WAV, the judging) ------------

def spec_text(task: AudioTask, rows: list[Row], backend: str, served: list[str]) -> str:
    return coverage_runs.spec_document("AudioCoverage", [
        f"  {row['name']}: {{task: {task.entry}, backend: {backend}, weights: {row['weights']}, "
        f"max_batch_size: {MAX_BATCH}}}" for row in rows], served)


def sampling_rate(row: Row) -> int:
    return int(json.loads((pathlib.Path(row["weights"]) / "preprocessor_config.json").read_text())["sampling_rate"])


def sample_wav(folder: pathlib.Path, rate: int) -> pathlib.Path:
    """The WAV every model of the batch at ``rate`` answers: a harmonic voice gliding in pitch, opened and closed
    four times a second, under a little noise (seed 0), 16-bit PCM."""
    from model_build.backends.ensemble.audio_samples import pcm_wav

    path = folder / f"sample-{rate}.wav"
    if not path.is_file():
        t = np.arange(int(SAMPLE_SECONDS * rate)) / rate
        pitch = 2 * np.pi * np.cumsum(140 + 40 * np.sin(2 * np.pi * 0.9 * t)) / rate
        voice = sum(np.sin(k * pitch) / k for k in range(1, 6)) * (0.5 + 0.5 * np.sin(2 * np.pi * 4 * t))
        noise = 0.02 * np.random.default_rng(0).standard_normal(t.size)
        path.write_bytes(pcm_wav(0.3 * voice + noise, rate))
    return path


def serve(task: AudioTask) -> Callable[[list[Row], coverage_runs.Batch], coverage_runs.Answers]:
    """Each built entry answers the WAV at its sampling rate (coverage_runs.invoke_each), judged against the
    task's pipeline on the same file."""
    def invoke(built: list[Row], batch: coverage_runs.Batch) -> coverage_runs.Answers:
        def wav(row: Row) -> pathlib.Path:
            return sample_wav(batch.folder, sampling_rate(row))

        return coverage_runs.invoke_each(built, batch, lambda row: ["--audio", str(wav(row))],
                                         lambda row, document: judge(task, row, document, wav(row)))
    return invoke


def judge(task: AudioTask, row: Row, document: dict[str, Any], wav: pathlib.Path) -> tuple[bool, str]:
    folder = pathlib.Path(row["weights"])
    if task.kind == "automatic-speech-recognition":
        return same_transcript(document, lambda: str(pipeline_answer(task, folder, wav)["text"]))
    config = json.loads((folder / "config.json").read_text())
    known = set((config.get("id2label") or {}).values())
    return coverage_runs.label_answer(document, known, TOP_K, lambda: {
        w["label"]: w["score"] for w in pipeline_answer(task, folder, wav, top_k=len(known))})


def pipeline_answer(task: AudioTask, folder: pathlib.Path, wav: pathlib.Path, **options: Any) -> Any:
    """transformers' pipeline of the task on the file as scipy reads it (the reference of the build's check)."""
    import transformers

    from model_build.backends.ensemble.audio_samples import reference_waveform

    waveform, rate = reference_waveform(wav.read_bytes())
    pipe = (transformers.pipeline("automatic-speech-recognition", model=str(folder), device="cpu")
            if task.kind == "automatic-speech-recognition" else
            transformers.pipeline("audio-classification", model=str(folder), device="cpu"))
    return pipe({"raw": waveform, "sampling_rate": rate}, **options)


def same_transcript(document: dict[str, Any], reference: Callable[[], str]) -> tuple[bool, str]:
    """(ok, what): the served ``text`` (one row) must be the pipeline's transcript, character for character."""
    outputs = {o["name"]: o["data"] for o in document.get("outputs", [])}
    texts = outputs.get("text")
    if not isinstance(texts, list) or len(texts) != 1 or not isinstance(texts[0], str):
        return False, f"the answer has outputs {', '.join(outputs) or 'none'}, not one text: {texts}"
    want = reference()
    if texts[0] != want:
        return False, f"served {json.dumps(texts[0])}; the pipeline answers {json.dumps(want)}"
    return True, f"{json.dumps(texts[0])} (as the pipeline" + (f"; {EMPTY_NOTE})" if not want else ")")


def coverage(task: AudioTask) -> coverage_runs.Coverage:
    return coverage_runs.Coverage(
        spec_text=lambda rows, backend, served: spec_text(task, rows, backend, served), serve=serve(task),
        make_checkpoint=make_checkpoint, entry_name=lambda row: entry_name(task, row),
        label=lambda row: [row["model_type"]], first_step="preprocess", cases="raw clips",
        not_counted={tiny_checkpoints.NotInstantiable: NOT_INSTANTIABLE,
                     audio_checkpoints.NoFeatureExtractor: NO_EXTRACTOR},
        not_ready="not instantiable or without a feature extractor", answer_key="served")


# --- reports -----------------------------------------------------------------------------------------------

def summary_of(task: AudioTask, rows: list[Row]) -> Row:
    done = {r["model_type"] for r in rows}
    counted = [r for r in rows if r["outcome"] not in (NOT_INSTANTIABLE, NO_EXTRACTOR)]
    outcomes = coverage_runs.outcomes(counted)
    weak = FLAT_NOTE if task.kind == "audio-classification" else EMPTY_NOTE
    return {
        "task": task.kind, "mapped": len(mapped(task)), "run": len(rows), "not_run_yet": len(set(mapped(task)) - done),
        "not_instantiable": sum(r["outcome"] == NOT_INSTANTIABLE for r in rows),
        "no_feature_extractor": sum(r["outcome"] == NO_EXTRACTOR for r in rows),
        "instantiable": len(counted), **outcomes,
        "served_weak_checks": sum(weak in r.get(b, {}).get("served", "") for r in rows for b in BACKENDS),
        "with_tracebacks": sum(coverage_runs.tracebacks(r) > 0 for r in rows),
        "tracebacks": sum(coverage_runs.tracebacks(r) for r in rows),
        "served_percent": coverage_runs.percent(outcomes["built_verified_served"], len(counted)),
    }


def write_reports(task: AudioTask, progress: coverage_runs.Progress, out: pathlib.Path) -> Row:
    rows = sorted(progress.results.values(), key=lambda r: r["model_type"])
    summary = summary_of(task, rows)
    coverage_runs.write_reports(out, task.stem, progress, summary, rows,
                                lambda s, r, b, started, machine: markdown(task, s, r, b, started, machine))
    return summary


def markdown(task: AudioTask, s: Row, rows: list[Row], batches: list[Row], started: str, machine: str) -> str:
    ctc = task.kind == "automatic-speech-recognition"
    share = f"{s['served_percent']:.0f} %" if s["served_percent"] is not None else "-"
    weak = ("served with an empty transcript (the random CTC head answered blanks only)" if ctc else
            "served checkpoint(s) score all labels alike (random tiny weights whose logits do not tell labels apart)")
    head = ["| mapped | run | not instantiable | no feature extractor | instantiable | built+verified+served | served "
            "of instantiable | built, not served | refused (ONNX) | pytorch way out: served / tried | weak checks | "
            "with tracebacks |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
            f"| {s['mapped']} | {s['run']} | {s['not_instantiable']} | {s['no_feature_extractor']} | "
            f"{s['instantiable']} | {s['built_verified_served']} | {share} | {s['built_verified_not_served']} | "
            f"{len(s['refused'])} | {s['pytorch_way_out']['served']} / {s['pytorch_way_out']['tried']} | "
            f"{s['served_weak_checks']} | {s['with_tracebacks']} |"]
    refusals = [coverage_runs.refusal_line(model_type, why, next(r for r in rows if r["model_type"] == model_type))
                for model_type, why in s["refused"].items()]
    table = [f"| architecture | feature extractor{' / tokenizer' if ctc else ''} | checkpoint | outcome "
             "(onnxruntime) | reason / verification | served answer | pytorch way out | build s | tracebacks |",
             "|---|---|---|---|---|---|---|---:|---:|"]
    for r in rows:
        onnx, torch_way = r.get("onnxruntime", {}), r.get("pytorch", {})
        answer = (torch_way if torch_way.get("outcome") == SERVED else onnx).get("served", "")
        made = r.get("feature_extractor", "") + (f" / {r['tokenizer']}" if r.get("tokenizer") else "")
        table.append(f"| {r['model_type']} ({r['class']}) | {cell(made)} | {r.get('parameters', '')} | {r['outcome']} "
                     f"| {cell(coverage_runs.verdict(r))} | {cell(answer)} | {cell(coverage_runs.way_out(r))} | "
                     f"{onnx.get('build_seconds', '')} | {coverage_runs.tracebacks(r)} |")
    line = (f"Summary: {s['mapped']} mapped ({s['run']} run, {s['not_run_yet']} not run yet), {s['not_instantiable']} "
            f"not instantiable, {s['no_feature_extractor']} without a feature extractor that can be made here, "
            f"{s['instantiable']} instantiable, {s['built_verified_served']} built+verified+served ({share} of "
            f"instantiable), {len(s['refused'])} refused with onnxruntime, pytorch way out "
            f"{s['pytorch_way_out']['served']} served of {s['pytorch_way_out']['tried']} tried, {s['tracebacks']} "
            f"tracebacks; {s['served_weak_checks']} {weak}.")
    answer_rule = ("the same transcript, character for character" if ctc else
                   f"the same {TOP_K} labels, scores within {coverage_runs.SCORE_ATOL:g}")
    return (f"# {task.title}: `task: {{kind: {task.kind}}}` entries over transformers' architectures\n\n"
            f"Made by `benchmarks/hf_audio_coverage.py --task {task.kind}` (started {started}, {machine}; transformers "
            f"5.23.0 `{task.mapping}`; Triton {TRITON_VERSION}, backend onnxruntime, max_batch_size {MAX_BATCH}"
            + ("" if ctc else f", top_k {TOP_K}") + f"). Served: built, verified at build time against transformers' "
            f"pipeline('{task.kind}') on raw WAV and FLAC clips, and answering one WAV ({SAMPLE_SECONDS:g} s, 16-bit "
            "PCM) on the local Triton server (`tritonsm serve --cpu-stand-in`, `tritonsm invoke --audio`) as the "
            f"pipeline does on the same file ({answer_rule}). Not instantiable and no feature extractor: not "
            "counted.\n\n" + line + "\n\n" + coverage_runs.sections(head, refusals, batches, table))


# --- main --------------------------------------------------------------------------------------------------

def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--task", required=True, choices=sorted(TASKS))
    coverage_runs.add_arguments(parser, "/tmp/hf_audio_coverage", only="model types, comma-separated",
                                limit="run at most N architectures not run before", build_size="")
    args = parser.parse_args()
    args.work = args.work / args.task  # one results.json per task
    coverage_runs.parse_only(parser, args, mapped(TASKS[args.task]), args.task)
    return args


def main() -> int:
    args = arguments()
    task = TASKS[args.task]
    progress = coverage_runs.Progress.load(args)
    todo = coverage_runs.pending(architectures(task), progress, args)
    summary = coverage_runs.run(todo, progress, args, coverage(task), lambda done: write_reports(task, done, args.out))
    print(json.dumps({k: v for k, v in summary.items() if k not in ("refused", "pytorch_way_out")}, indent=1),
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
