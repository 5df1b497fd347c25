"""An audio task's ensemble verified as a whole at build time: WAV files through the files that ship, against
``transformers.pipeline`` of the task on the same clips.

The preprocessing step's and the answer step's ``model.py`` are the built files themselves (decoding,
transformers' feature extractor of the same release as the execution environment's, CTC decoding), the model
step's file runs in the serving runtime (task_check.run_model_requests), one request per clip as an application
sends them. The reference decodes each file with scipy, not with the step's decoder, and hands the pipeline the
waveform with its sampling rate. A difference fails the build with the clips that differ; the manifest records
what ran, the reference and the worst difference.
"""
from __future__ import annotations

import pathlib
import sys
from typing import Any, Callable

import numpy as np
import numpy.typing as npt

from deployment_spec.builds.manifest import Verification
from deployment_spec.sections.tasks import TaskKind
from model_build import layout
from model_build.backends.ensemble import audio_samples, task_check, task_reference
from model_build.errors import BuildError
from model_build.recipes import audio_steps
from model_build.verification import verify

FEATURES_DIFFER = ("The preprocessing step decodes the WAV or FLAC and runs the checkpoint's feature extractor "
                   "(preprocessor_config.json); its features differ from the feature extractor's on the file as "
                   "scipy (WAV) or soundfile (FLAC) reads it")
ANSWERS_DIFFER = ("The preprocessing step's features equal the feature extractor's; the model answers otherwise "
                  "in the serving runtime; try the other backend (onnxruntime or pytorch), or another architecture")
FEATURE_ATOL = 1e-5  # transformers' own class in the step (the same code); a numpy stand-in states its own


def check(chain: task_check.Chain, scratch: pathlib.Path, log: Callable[[str], None]) -> Verification:
    """Raw clips through the chain's files against the pipeline; BuildError naming the clips that differ."""
    task = chain.task
    params = task_check.step_parameters(chain.dirs[0])
    rate = audio_steps.sampling_rate(chain.checkpoint)  # the checkpoint's, not the step's: the step is checked
    samples = audio_samples.clips(rate, task.max_audio_seconds)
    module = task_check.step_module(chain.dirs[0], "preprocess")
    step = module.Preprocess(str(layout.version_dir(chain.dirs[0])), params)
    name = params["output"]
    features = []
    for index, sample in enumerate(samples):
        try:
            features.append(step.features(np.array([sample.data], dtype=np.object_)))
        except Exception as exc:  # noqa: BLE001 - a refusal (RequestError) or the feature extractor's own error
            # transformers' errors may dump the extractor's JSON first: their last line says what is wrong.
            last = (str(exc).strip().splitlines() or [""])[-1].strip()
            said = str(exc) if isinstance(exc, module.RequestError) else f"{type(exc).__name__}: {last}"
            raise BuildError(f"model {chain.name}: the preprocessing step refuses raw clip {index} ({sample.what}) at "
                             f"{rate} Hz, which the checkpoint's feature extractor takes: {said}; rebuild the model "
                             "(its step does not follow the checkpoint's preprocessor_config.json)") from None
    got, ran = task_check.run_model_requests(chain, [{name: f} for f in features], scratch, log)
    answer, answer_params = task_check.answer_step(chain)
    ours = [_answer_of(task.kind, answer.answer(task.kind.value, answer_params, g)) for g in got]
    where, theirs, their_features = _reference_or_refuse(chain, samples, rate, name)
    atol = max(FEATURE_ATOL, module.audio_features.tolerance(step.extractor))
    wrong = _feature_problems(features, their_features, atol)
    worst, problems = task_reference.compare(task, ours, theirs, chain.model_step.tolerance.atol, wrong)
    if problems:
        named = [p.replace(f"row {i}:", f"clip {i} ({samples[i].what}):", 1)
                 for i, p in ((int(p.split(":", 1)[0].split()[1]), p) for p in problems)]
        raise BuildError(f"model {chain.name}: raw audio through its steps does not answer as {where} on "
                         f"{len(problems)} of {len(samples)} clips: " + "; ".join(named[:3]) + ". " +
                         (FEATURES_DIFFER if wrong else ANSWERS_DIFFER))
    measure = "texts differing" if task.kind is TaskKind.SPEECH_RECOGNITION else "max score difference"
    log(f"  {chain.name}: {len(samples)} raw clips answer as {where} ({measure} {worst:.2g})")
    return Verification(ran=True, triton_version=chain.triton_version, runtime=ran["runtime"],
                        version=ran["version"], device="cpu", cases=len(samples), max_abs_error=worst,
                        details={"reference": where, "measure": measure, "task": task.kind.value,
                                 "feature_extractor": params["feature_class"],
                                 **_stand_in(step.extractor, features, their_features, atol), "sampling_rate": rate,
                                 "clips": [s.what for s in samples],
                                 "preprocess": f"transformers {task_check.package_version('transformers')} (Python "
                                               f"{sys.version_info.major}.{sys.version_info.minor} of the build)"})


def _answer_of(kind: TaskKind, made: dict[str, Any]) -> Any:
    if kind is TaskKind.SPEECH_RECOGNITION:
        text = made["text"][0][0]
        return text.decode() if isinstance(text, bytes) else str(text)
    return task_check.label_rows(made)[0]


def reference(chain: task_check.Chain, samples: list[audio_samples.RawAudio], rate: int, name: str
              ) -> tuple[str, list[Any], list[npt.NDArray[np.float32]]]:
    """(what answered, its answer per clip, the features the checkpoint's extractor makes of each)."""
    import transformers

    pipe = transformers.pipeline(chain.task.kind.value, model=str(chain.checkpoint), device="cpu")
    answers, features = [], []
    for sample in samples:
        wave, found = audio_samples.reference_waveform(sample.data)
        given = {"raw": wave, "sampling_rate": found}
        if chain.task.kind is TaskKind.SPEECH_RECOGNITION:
            answers.append(pipe(given)["text"])
        else:
            answers.append(list(pipe(given, top_k=task_reference.reference_top_k(chain.task))))
        made = pipe.feature_extractor(wave, sampling_rate=found, return_tensors="np")[name]
        features.append(np.asarray(made, dtype=np.float32))
    where = (f"transformers {transformers.__version__} pipeline('{chain.task.kind.value}') "
             f"({type(pipe.feature_extractor).__name__})")
    return where, answers, features


def _reference_or_refuse(chain: task_check.Chain, samples: list[audio_samples.RawAudio], rate: int, name: str
                         ) -> tuple[str, list[Any], list[npt.NDArray[np.float32]]]:
    try:
        return reference(chain, samples, rate, name)
    except Exception as whole:  # the model's own library fails: find the clip, say it in one line
        failed, said = whole, "the raw clips together"
        for sample in samples:
            try:
                reference(chain, [sample], rate, name)
            except Exception as exc:
                failed, said = exc, f"the clip {sample.what}"
                break
        raise BuildError(
            f"model {chain.name}: the {chain.task.kind.value} reference (the checkpoint in transformers' pipeline, "
            f"as its users run it) itself fails on {said}: {verify.last_line(failed)}; so this checkpoint cannot be "
            "verified for raw audio, and would fail on such requests when served; fix: use another architecture "
            "or checkpoint") from None


def _stand_in(extractor: Any, ours: list[npt.NDArray[np.float32]], theirs: list[npt.NDArray[np.float32]],
              atol: float) -> dict[str, Any]:
    """What the manifest says of a numpy stand-in the step runs instead of transformers' class ({} if none)."""
    if not hasattr(extractor, "replaces"):
        return {}
    worst = max(float(np.max(np.abs(a - b))) for a, b in zip(ours, theirs))
    return {"feature_stand_in": {"class": type(extractor).__name__, "file": "audio_stand_ins.py",
                                 "max_feature_difference": worst, "feature_atol": atol}}


def _feature_problems(ours: list[npt.NDArray[np.float32]], theirs: list[npt.NDArray[np.float32]],
                      atol: float) -> dict[int, str]:
    out = {}
    for row, (a, b) in enumerate(zip(ours, theirs)):
        if a.shape != b.shape:
            out[row] = f"features of shape {list(a.shape)}, the feature extractor's {list(b.shape)}"
        elif not np.allclose(a, b, atol=atol, rtol=0):
            out[row] = f"features differ from the feature extractor's by up to {float(np.max(np.abs(a - b))):.3g}"
    return out
