"""Which transformers architectures a generating `task:` entry decodes token-identically to transformers' generate.

    .venv/bin/python benchmarks/hf_generation_coverage.py [--only gpt2,t5] [--limit N] [--jobs 2]
        [--work /tmp/hf_generation_coverage] [--fresh] [--no-serve]

Every model type transformers 5.23 maps for the three generating kinds (transformers.models.auto.modeling_auto):

    text-generation         MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
    text2text-generation    MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES
    speech seq2seq          MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES (automatic-speech-recognition, backend python)

For each text row: a tiny random checkpoint made offline from the architecture's own config
(benchmarks/tooling/tiny_checkpoints.py ``save_with_tokenizer``: 2 layers, width 32, seed 0) with a tokenizer of
its family's algorithm trained offline (benchmarks/tooling/text_checkpoints.py, 400 tokens; the family as
benchmarks/hf_task_coverage.py ``algorithm`` picks it); its linear and embedding weights are then drawn wider
(``WANDER``) because a random model at the default initialisation repeats one token, which any decoding matches.
Then what `tritonsm build` does for such an entry, in-process: the recipe (model_build/recipes/generate_model.py,
through ``load_python`` as the Python backend calls it: the Auto-class refusal) and the build-time verification
(model_build/backends/python/generation_check.py ``verify``: greedy, each prompt alone token-identical, then all
together in the engine's running batch and, decoder-only, generate on a left-padded batch, near-ties reported).
Each speech row: the tiny checkpoint of benchmarks/tooling/speech_checkpoints.py (or generation_checkpoints
``save_whisper``) with its own feature extractor class, and the same recipe and verification (three synthetic clips
alone and at once, a multilingual Whisper also with a request's language and task); a model type the engine does
not decode is a config.json naming it, which the spec's loader refuses with its cause (no weights needed to refuse).

A representative subset (``SERVED``: as many per kind as it names, of those that verified) is then built for real
(`tritonsm build --python-env-for local`, one single-model endpoint each), served on the local Triton server
(`tritonsm serve --all --cpu-stand-in`) and asked through boto3's InvokeEndpointWithResponseStream; the
``text_output`` of the SSE events, concatenated, must equal
``tokenizer.decode(generate(...), skip_special_tokens=True)`` of the same prompt (greedy, the same max_new_tokens).

Outcomes: token-identical; near-tie at position P (margin M); refused: <the build's message>; failed: <exception
type and first line> (a Python exception anywhere, the engine's own included: a defect, listed first); skipped:
<cause> where the architecture does not make a tiny text checkpoint offline (a cause outside the product: not
counted in the denominator). Resumable: results accumulate in
<work>/results.json and a row with a result is not run again (``--fresh`` forgets them). Writes
benchmarks/hf_generation_coverage.md and .json.
"""
from __future__ import annotations

import argparse
import io
import collections
import concurrent.futures
import datetime
import json
import logging
import multiprocessing
import os
import pathlib
import platform
import re
import shutil
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.tooling import coverage_runs  # noqa: E402
from benchmarks.tooling.coverage_runs import TRITON_VERSION, Row, cell, say  # noqa: E402
from benchmarks.tooling.run_log import run_logged  # noqa: E402

KINDS = {"text-generation": "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES",
         "text2text-generation": "MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES",
         "speech seq2seq": "MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES"}
TEXT_KINDS = ("text-generation", "text2text-generation")
PREFIX = {"text-generation": "gen", "text2text-generation": "t2t", "speech seq2seq": "asr"}
TASK_KIND = {"speech seq2seq": "automatic-speech-recognition"}  # the spec's task.kind where it is not the row's
# Served for real when they verify in-process: the families users deploy most, then whatever else verified.
SERVED = {"text-generation": ("gpt2", "llama", "qwen2", "mistral", "gemma"),
          "text2text-generation": ("t5", "bart", "marian", "mbart", "pegasus"),
          "speech seq2seq": ("whisper", "qwen3_asr", "vibevoice_asr", "voxtral", "kyutai_speech_to_text",
                             "voxtral_realtime", "speech_to_text", "moonshine")}  # each way a speech model decodes
IDENTICAL, NEAR_TIE, REFUSED, FAILED, SKIPPED, NOT_YET = (
    "token-identical", "near-tie", "refused", "failed", "skipped", "not yet: audio input")
MAX_NEW_TOKENS = 16  # the served requests, as generation_check.NEW_TOKENS
WANDER = 2.0  # weights ~ N(0, WANDER / sqrt(fan-in)): a random tiny model then cycles through many tokens
WEAK = 2  # distinct tokens in a row's reference answer at or under which its agreement is a weak check
ENGINE_FAILED = "the generation engine failed on a verification prompt"
# The recipe's refusal of a decoder reading audio features that transformers maps for AutoModelForSeq2SeqLM (Qwen2-Audio,
# Voxtral...): not counted there (their input is audio, not a text prompt); the speech seq2seq rows count them.
AUDIO_LLM = "for its audio input, which a text2text-generation request does not send"
# generate's ForcedEOSTokenLogitsProcessor: the last new token is the end token whatever the logits (margin inf).
FORCED = re.compile(rf"alone: new token {MAX_NEW_TOKENS - 1} is \d+ where transformers' generate picks \d+ "
                    r"\(its top two logits inf apart")
WAIT_S = 180  # a tiny model decodes the verification prompts in seconds; a hung engine ends the row, not the run
PROJECT, ENVIRONMENT = "GenCoverage", "dev"


# --- rows --------------------------------------------------------------------------------------------------

def architectures() -> list[Row]:
    from transformers.models.auto import modeling_auto

    rows = []
    for kind, mapping in KINDS.items():
        for model_type, name in sorted(getattr(modeling_auto, mapping).items()):
            rows.append({"kind": kind, "model_type": model_type, "class": name if isinstance(name, str) else name[0],
                         "key": f"{kind}:{model_type}"})
    return rows


def entry_name(row: Row) -> str:
    return f"{PREFIX[row['kind']]}_" + re.sub(r"\W", "_", row["model_type"])


def spec_lines(rows: list[Row]) -> list[str]:
    # max_prompt_tokens: the verification prompts whole (generation_check cuts at it); 4 decode together.
    return [f"  {entry_name(r)}: {{task: {{kind: {TASK_KIND.get(r['kind'], r['kind'])}, generation: {{max_new_tokens: 64, "
            f"default_max_new_tokens: {MAX_NEW_TOKENS}, max_prompt_tokens: 256}}}}, backend: python, "
            f"weights: {r['weights']}, max_batch_size: 4}}" for r in rows]


# --- one row, in a worker process --------------------------------------------------------------------------

class _ExceptionsLogged(logging.Handler):
    """Counts records logged with a traceback (the engine's scheduler logs its exceptions and carries on)."""

    def __init__(self) -> None:
        super().__init__()
        self.first: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info and record.exc_info[1] is not None:
            self.first.append(_first(record.exc_info[1]))


def _worker_start(threads: int) -> None:
    import torch

    from model_build.backends.python import generation_check

    torch.set_num_threads(threads)  # --jobs share the cores
    generation_check.WAIT_S = WAIT_S
    logging.getLogger().addHandler(_ExceptionsLogged())


def check(row: Row, folder: pathlib.Path) -> Row:
    """The row's checkpoint, the recipe and the build-time verification; the row with its outcome."""
    started = time.monotonic()
    handler = next(h for h in logging.getLogger().handlers if isinstance(h, _ExceptionsLogged))
    handler.first.clear()
    try:
        make_checkpoint(row, folder)
    except Exception as exc:  # NotInstantiable, or the tokenizer's own refusal: outside the product
        row.update(outcome=SKIPPED, reason=str(exc) if type(exc).__name__ == "NotInstantiable" else _first(exc))
        return row
    try:
        verify_row(row, folder)
    except Exception as exc:  # a traceback: the product's defect, recorded with its type and first line
        row.update(outcome=FAILED, reason=_first(exc))
    row["seconds"] = round(time.monotonic() - started, 1)
    if handler.first:
        row["logged_exceptions"] = handler.first[:3]
        if row["outcome"] != FAILED:  # the engine caught and logged it, yet the row passed: still a defect
            row.update(outcome=FAILED, reason=f"logged: {handler.first[0]}")
    return row


def make_checkpoint(row: Row, folder: pathlib.Path) -> None:
    import torch
    import transformers
    from transformers.pytorch_utils import Conv1D

    from benchmarks.hf_task_coverage import algorithm
    from benchmarks.tooling import text_checkpoints, tiny_checkpoints

    if row["kind"] not in TEXT_KINDS:
        make_speech_checkpoint(row, folder)
        return
    algo, why = algorithm(row["model_type"])
    shutil.rmtree(folder, ignore_errors=True)
    row.update(weights=str(folder), tokenizer=algo, tokenizer_why=why)
    row["parameters"] = tiny_checkpoints.save_with_tokenizer(row["model_type"], row["class"], folder,
                                                             text_checkpoints.tokenizer(algo))
    auto = (transformers.AutoModelForSeq2SeqLM if row["kind"] == "text2text-generation"
            else transformers.AutoModelForCausalLM)
    try:
        config = transformers.AutoConfig.from_pretrained(folder)
        # An encoder family (BERT, RoBERTa ...) saved as a causal LM attends both ways unless is_decoder is set:
        # transformers warns to set it, and a checkpoint trained to generate has it.
        if row["kind"] == "text-generation" and getattr(config, "is_decoder", None) is False:
            config.is_decoder = True
            row["is_decoder"] = "set (the config's default is false)"
        net = auto.from_pretrained(folder, config=config).eval()
    except Exception as exc:  # the engine loads it the same way and says so in the verification
        row["wander"] = f"not widened: {_first(exc)}"
        return
    torch.manual_seed(tiny_checkpoints.SEED)
    with torch.no_grad():
        for module in net.modules():
            # GPT-2's Conv1D keeps its weight as (in, out); Linear and Embedding as (out, in) and (rows, width).
            if isinstance(module, (torch.nn.Linear, torch.nn.Embedding, Conv1D)):
                fan_in = module.weight.shape[0 if isinstance(module, Conv1D) else -1]
                module.weight.normal_(0, WANDER / fan_in ** 0.5)
    net.save_pretrained(folder)


def make_speech_checkpoint(row: Row, folder: pathlib.Path) -> None:
    """A tiny speech checkpoint the engine decodes; for any other type, the config.json the loader refuses."""
    from benchmarks.tooling import audio_llm_checkpoints, generation_checkpoints, speech_checkpoints

    shutil.rmtree(folder, ignore_errors=True)
    row.update(weights=str(folder), tokenizer="bpe-bytes")
    if row["model_type"] == "whisper":
        generation_checkpoints.save_whisper(folder)
    elif row["model_type"] in speech_checkpoints.MAKERS:
        speech_checkpoints.save(folder, row["model_type"])
    elif row["model_type"] in audio_llm_checkpoints.MAKERS:
        audio_llm_checkpoints.save(folder, row["model_type"])
    else:
        folder.mkdir(parents=True)
        (folder / "config.json").write_text(json.dumps({"model_type": row["model_type"]}))
        row["parameters"] = "config.json only"
        return
    import transformers

    model = transformers.AutoModelForSpeechSeq2Seq.from_pretrained(folder)
    row["parameters"] = f"{sum(p.numel() for p in model.parameters()):,} parameters"


def verify_row(row: Row, folder: pathlib.Path, probe: bool = True) -> None:
    """What `tritonsm build` does for the entry (model_build/backends/python/build.py): the recipe, then the
    verification against generate. ``probe``: a refusal at the last new token that generate forced (its
    generation_config's forced_eos_token_id) is tried again without it, to tell whether that is the only
    difference."""
    import yaml

    from deployment_spec import SpecError
    from deployment_spec.spec import parse_spec
    from model_build.backends.python import generation_check
    from model_build.errors import BuildError
    from model_build.recipes import load_python

    spec_file = folder.parent / f"{folder.name}.yaml"
    spec_file.write_text(coverage_runs.spec_document(PROJECT, spec_lines([row]), []))
    try:
        spec = parse_spec(yaml.safe_load(spec_file.read_text()), spec_file)
    except SpecError as exc:  # the loader's refusal (a speech type the engine does not decode)
        row.update(outcome=REFUSED, reason="; ".join(str(p) for p in exc.problems))
        return
    model = spec.models[entry_name(row)]
    log: list[str] = []
    try:
        made = load_python(model, spec.root, consumer_int32=False)
        verification = generation_check.verify(model, made.files, log.append)
    except BuildError as exc:
        message = str(exc)
        if ENGINE_FAILED in message:  # the engine raised inside: a traceback in the served model
            row.update(outcome=FAILED, reason=message[message.index(ENGINE_FAILED):])
        elif AUDIO_LLM in message:  # an audio LLM transformers maps for text2text: audio input, as speech seq2seq
            row.update(outcome=NOT_YET, reason=message)
        else:
            row.update(outcome=REFUSED, reason=message)
            if probe and FORCED.search(message) and _drop_forced_eos(folder):
                again = {**row}
                verify_row(again, folder, probe=False)
                row["without_forced_eos"] = again["outcome"] + (f": {again['reason']}" if again["reason"] else "")
        return
    details = verification.details or {}
    ties = details.get("near_ties") or []
    row["verified"] = {k: details.get(k) for k in ("alone", "engine_batch", "left_padded_generate")}
    row["distinct_tokens"] = _distinct(folder, row["kind"]) if row["kind"] in TEXT_KINDS else \
        _distinct_speech(folder)
    if not ties:
        row.update(outcome=IDENTICAL, reason="")
        return
    found = re.search(r"token (\d+) is .* ([-+.\de]+) apart", ties[0])
    where = f"position {found.group(1)} (margin {found.group(2)})" if found else ties[0]
    row.update(outcome=NEAR_TIE, reason=f"near-tie at {where}" + (f"; {len(ties)} near-ties" if len(ties) > 1
                                                                    else ""), near_ties=ties)


def _drop_forced_eos(folder: pathlib.Path) -> bool:
    """Removes forced_eos_token_id from the checkpoint's generation_config.json; False where it had none."""
    path = folder / "generation_config.json"
    settings = json.loads(path.read_text()) if path.is_file() else {}
    if settings.get("forced_eos_token_id") is None:
        return False
    del settings["forced_eos_token_id"]
    path.write_text(json.dumps(settings, indent=2))
    return True


def _distinct(folder: pathlib.Path, kind: str) -> int:
    """Distinct tokens in generate's answer to one verification prompt: 1 or 2 make the check weak."""
    return len(set(_greedy(folder, kind, "Once upon a time, in a land far away,")[0]))


def _distinct_speech(folder: pathlib.Path) -> int:
    """Distinct tokens in generate's answer to the build check's synthetic clips (tone, noise, chirp), the most of
    the three: the check tells tokens apart on that clip at least."""
    from benchmarks.tooling import speech_reference
    from model_build.backends.python.generation_check import _clips

    rate = _speech_rate(folder)
    return max(len(set(speech_reference.new_tokens(folder, clip, rate, MAX_NEW_TOKENS)[0])) for clip in _clips(rate))


def _tone_wav(rate: int) -> bytes:
    """One second of a 440 Hz tone, 16-bit PCM WAV at ``rate`` (what a recorder writes)."""
    import numpy as np
    import soundfile

    out = io.BytesIO()
    soundfile.write(out, 0.5 * np.sin(2 * np.pi * 440 * np.arange(rate) / rate), rate, format="WAV",
                    subtype="PCM_16")
    return out.getvalue()


def _speech_rate(folder: pathlib.Path) -> int:
    """The sampling rate a speech checkpoint's features are made at (its feature extractor's)."""
    import transformers

    return int(transformers.AutoFeatureExtractor.from_pretrained(folder).sampling_rate)


def _greedy(folder: pathlib.Path, kind: str, prompt: str) -> tuple[list[int], str]:
    """transformers' greedy new tokens for ``prompt`` alone, and their text as the engine streams it."""
    import torch
    import transformers

    tok = transformers.AutoTokenizer.from_pretrained(folder)
    auto = (transformers.AutoModelForSeq2SeqLM if kind == "text2text-generation"
            else transformers.AutoModelForCausalLM)
    net = auto.from_pretrained(folder).eval()
    ids = torch.tensor([tok(prompt)["input_ids"]])
    with torch.no_grad():
        out = net.generate(input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=False,
                           max_new_tokens=MAX_NEW_TOKENS,
                           pad_token_id=tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id)
    new = [int(t) for t in out[0][1 if net.config.is_encoder_decoder else ids.shape[1]:]]
    return new, str(tok.decode(new, skip_special_tokens=True))


def _first(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return f"{type(exc).__name__}: {lines[0] if lines else '(no message)'}"


# --- serving a subset for real -----------------------------------------------------------------------------

def endpoint_name(row: Row) -> str:
    return entry_name(row).replace("_", "-")


def serve_subset(rows: list[Row], work: pathlib.Path, clock: float) -> None:
    """Builds the chosen rows with `tritonsm build`, serves them and compares each streamed answer."""
    from deployment_spec.builds.manifest import load_manifest

    batch = coverage_runs.Batch(work / "served")
    shutil.rmtree(batch.folder, ignore_errors=True)
    batch.folder.mkdir(parents=True)
    endpoints = [f"  {endpoint_name(r)}: {{kind: single-model, models: [{entry_name(r)}], "
                 "instance_type: ml.g5.xlarge}" for r in rows]
    batch.spec.write_text(f'project: {PROJECT}\ntriton_version: "{TRITON_VERSION}"\nmodels:\n'
                          + "\n".join(spec_lines(rows)) + "\nendpoints:\n" + "\n".join(endpoints)
                          + f"\nenvironments:\n  {ENVIRONMENT}: {{region: us-east-1}}\n")
    say(clock, f"serving {', '.join(entry_name(r) for r in rows)}: tritonsm build")
    status, lines = run_logged(batch.build, batch.log_file, ROOT)
    manifest = load_manifest(batch.manifest) if batch.manifest.is_file() else None
    build_tracebacks = sum(coverage_runs.TRACEBACK in line for _, line in lines)
    built = []
    for row in rows:
        entry = manifest.models.get(entry_name(row)) if manifest else None
        if entry is None or not entry.verification.ran:
            why = next((line for _, line in reversed(lines) if line.startswith("error")), f"exit status {status}")
            row["served"] = {"ok": False, "detail": f"tritonsm build: {why} (see {batch.log_file})"}
        else:
            built.append(row)
    if not built:
        return
    say(clock, f"  built {len(built)} (build tracebacks: {build_tracebacks}); tritonsm serve --all")
    common = ["--spec", str(batch.spec), "--manifest", str(batch.manifest)]
    with coverage_runs.ServedEndpoint(common, batch.folder, batch.log_file, target=("--all",)) as (url, said):
        for row in built:
            row["served"] = _ask(row, url) if url else {"ok": False, "detail": f"not served (see {batch.log_file})"}
            say(clock, f"  {entry_name(row)}: {'ok' if row['served']['ok'] else 'FAILED'} {row['served']['detail']}")
    # Each server's log file is named in the serve command's start-up lines; their tracebacks count for all.
    logs = [pathlib.Path(found) for line in said for found in re.findall(r"(/\S+\.log)\b", line)]
    server_tracebacks = sum(log.read_text(errors="replace").count(coverage_runs.TRACEBACK)
                            for log in set(logs) if log.is_file())
    for row in built:
        row["served"]["tracebacks"] = build_tracebacks + server_tracebacks + sum(
            coverage_runs.TRACEBACK in line for line in said)


def _ask(row: Row, url: str) -> Row:
    """Streams one prompt (a speech row: one clip, a WAV at its feature extractor's rate) and compares the
    concatenated text_output with generate's decoded answer."""
    from benchmarks.tooling import speech_reference
    from local_endpoint.client.invoke_stream import audio_body, generate_body, stream_sagemaker_endpoint
    from local_endpoint.client.local_clients import local_client

    prompt = "The quick brown fox"
    folder = pathlib.Path(row["weights"])
    parameters: dict[str, object] = {"max_new_tokens": MAX_NEW_TOKENS}
    wav = _tone_wav(_speech_rate(folder)) if row["kind"] == "speech seq2seq" else b""
    body = audio_body(wav, parameters) if wav else generate_body(prompt, parameters)
    name = f"{PROJECT}-{ENVIRONMENT}-{endpoint_name(row)}"
    pieces: list[str] = []
    try:
        stream_sagemaker_endpoint(name, body, pieces.append, endpoint_url=url,
                                  client=local_client("sagemaker-runtime", url, read_timeout=300))
    except Exception as exc:  # an InvokeError or the client's own: the row's served answer failed
        return {"ok": False, "detail": _first(exc)}
    got = "".join(pieces)
    want = speech_reference.transcript(folder, wav, MAX_NEW_TOKENS) if wav else _greedy(folder, row["kind"], prompt)[1]
    return {"ok": got == want, "detail": f"{len(pieces)} events, {got!r}" + ("" if got == want else
                                                                             f"; generate decodes {want!r}")}


# --- reports -----------------------------------------------------------------------------------------------

def cause(reason: str) -> str:
    """A refusal's or failure's cause without the row's own names and numbers, so that alike ones group."""
    text = re.sub(r"models\.\w+", "models.<entry>", reason)
    text = re.sub(r"(?<!\w)/\S+", "<path>", text)  # a file path, not the / of key/value
    text = re.sub(r"'[^']*' checkpoint", "<type> checkpoint", text)
    text = re.sub(r"verification prompt \d+ \(.*?\)", "verification prompt <n>", text)
    text = re.sub(r"-?\d+(\.\d+)?(e-?\d+)?", "<n>", text)
    return text[:300]


def summary(rows: list[Row]) -> dict[str, Row]:
    from transformers.models.auto import modeling_auto

    out = {}
    for kind, mapping in KINDS.items():
        run = [r for r in rows if r["kind"] == kind]
        count = collections.Counter(r["outcome"] for r in run)
        counted = len(run) - count[SKIPPED] - count[NOT_YET]
        ok = count[IDENTICAL] + count[NEAR_TIE]
        out[kind] = {
            "mapped": len(getattr(modeling_auto, mapping)), "run": len(run), "skipped": count[SKIPPED],
            "not_yet_audio": count[NOT_YET], "counted": counted, "token_identical": count[IDENTICAL],
            "near_ties": count[NEAR_TIE], "refused": count[REFUSED], "failed": count[FAILED],
            "weak": sum(r["outcome"] == IDENTICAL and r.get("distinct_tokens", WEAK + 1) <= WEAK for r in run),
            "percent": round(100 * ok / counted, 1) if counted else None,
            "served": sum(bool(r.get("served", {}).get("ok")) for r in run),
            "served_tried": sum("served" in r for r in run),
            "refusal_causes": dict(collections.Counter(cause(r["reason"]) for r in run
                                                       if r["outcome"] == REFUSED).most_common()),
            "fixed_by_forced_eos": sum(r.get("without_forced_eos") == IDENTICAL for r in run),
            "failure_causes": dict(collections.Counter(cause(r["reason"]) for r in run
                                                       if r["outcome"] == FAILED).most_common()),
            "skip_causes": dict(collections.Counter(cause(r["reason"]) for r in run
                                                    if r["outcome"] == SKIPPED).most_common()),
        }
    return out


def how(row: Row) -> str:
    served = row.get("served")
    if served is None:
        return "verified in-process" if row["outcome"] in (IDENTICAL, NEAR_TIE, REFUSED, FAILED) else ""
    return "served: " + ("answer as generate" if served["ok"] else f"FAILED ({served['detail']})")


def markdown(s: dict[str, Row], rows: list[Row], started: str, machine: str) -> str:
    head = ["| kind | mapped | run | skipped (not counted) | not yet: audio | counted | token-identical (weak) | "
            "near-ties | refused | failed | identical or near-tie | served for real: ok / tried |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for kind, k in s.items():
        share = f"{k['percent']:.1f} %" if k["percent"] is not None else "-"
        head.append(f"| {kind} | {k['mapped']} | {k['run']} | {k['skipped']} | {k['not_yet_audio']} | {k['counted']} "
                    f"| {k['token_identical']} ({k['weak']}) | {k['near_ties']} | {k['refused']} | {k['failed']} | {share} | "
                    f"{k['served']} / {k['served_tried']} |")
    causes = []
    for kind, k in s.items():
        if k.get("fixed_by_forced_eos"):
            causes.append(f"\n**{kind}:** {k['fixed_by_forced_eos']} refusals at the last new token, where generate "
                          "forces the end token (generation_config forced_eos_token_id), verify token-identical "
                          "once that setting is removed.\n")
        for title, key in (("failed", "failure_causes"), ("refused", "refusal_causes"), ("skipped", "skip_causes")):
            if k[key]:
                causes.append(f"\n**{kind}, {title}:**\n")
                causes.extend(f"- {n} x {cell(c)}" for c, n in k[key].items())
    order = {FAILED: 0, REFUSED: 1, NEAR_TIE: 2, IDENTICAL: 3, SKIPPED: 4, NOT_YET: 5}
    table = ["| kind | architecture | outcome | reason | how | tokenizer | checkpoint | distinct tokens | s |",
             "|---|---|---|---|---|---|---|---:|---:|"]
    for r in sorted(rows, key=lambda r: (order[r["outcome"]], r["kind"], r["model_type"])):
        probed = f" — without forced_eos_token_id: {r['without_forced_eos']}" if "without_forced_eos" in r else ""
        made = r.get("parameters", "") + ("; is_decoder set" if "is_decoder" in r else "")
        table.append(f"| {r['kind']} | {r['model_type']} ({r['class']}) | {r['outcome']} | "
                     f"{cell(r.get('reason', '') + probed)} | {cell(how(r))} | {r.get('tokenizer', '')} | {made} | "
                     f"{r.get('distinct_tokens', '')} | {r.get('seconds', '')} |")
    return (
        "# Generation coverage of `task:` entries over transformers' architectures\n\n"
        f"Made by `benchmarks/hf_generation_coverage.py` (started {started}, {machine}; transformers "
        f"{_transformers_version()}, model_build/python_models/generation_engine.py sha256 {engine_sha()}). Each text architecture: a tiny random checkpoint (2 layers, width 32, seed 0, "
        "weights widened so it cycles through tokens) with a tokenizer of its family trained offline (400 tokens); "
        "the build's recipe and its build-time verification against transformers' generate run in-process "
        "(greedy, 6 prompts x 16 new tokens: each alone, together in the engine's running batch, and for "
        "decoder-only models generate on a left-padded batch). Rows marked *served* were also built by `tritonsm "
        "build --python-env-for local`, served on the local Triton server and asked through "
        "InvokeEndpointWithResponseStream; the concatenated `text_output` equals the decoded generate answer.\n\n"
        f"Weak: generate's answer to one prompt has at most {WEAK} distinct tokens (the tiny model repeats one), "
        "so agreeing says less. The percentage is (token-identical + near-ties) of the counted rows. Skipped rows are architectures the "
        "benchmark's tiny-checkpoint maker cannot instantiate offline from their config alone (external files, "
        "sub-configs it does not shrink, the tokenizer's own limits): a cause outside the product, so they are "
        "listed with it and not counted. Speech seq2seq rows: the tiny checkpoints of "
        "benchmarks/tooling/speech_checkpoints.py (encoder-decoders: width 32, 2 layers, each type's own feature "
        "extractor) and benchmarks/tooling/audio_llm_checkpoints.py (audio language models: the processor with a "
        "chat template that holds the clip) through the same recipe and build-time verification on three synthetic "
        "clips (alone and at once; with a request's language and context prompt where the checkpoint takes them); "
        "a type the engine does not decode is refused by the spec's loader from its config.json, with the cause. "
        "Served speech rows were asked with a one-second 440 Hz tone (a WAV at the feature extractor's rate) and "
        "compared with generate on the same clip. "
        "The audio LLMs transformers maps for AutoModelForSeq2SeqLM (one decoder reading audio features: Qwen2-Audio, "
        "Voxtral...) are refused by the recipe for their audio input and listed as not yet: audio, not counted "
        "under text2text-generation. "
        "Failed (a Python exception, also one the engine caught and logged) rows come first.\n\n"
        + "\n".join(head) + "\n\n## Causes\n" + ("\n".join(causes) or "\nNone.") + "\n\n## Per architecture\n\n"
        + "\n".join(table) + "\n")


def engine_sha() -> str:
    """The engine the rows ran (it is being changed for speed: the results hold for this file)."""
    import hashlib

    return hashlib.sha256((ROOT / "model_build/python_models/generation_engine.py").read_bytes()).hexdigest()[:12]


def _transformers_version() -> str:
    import transformers

    return str(transformers.__version__)


def write_reports(rows: list[Row], started: str, out: pathlib.Path) -> dict[str, Row]:
    s = summary(rows)
    out.mkdir(parents=True, exist_ok=True)
    machine = f"{platform.machine()}, {os.cpu_count()} cores, shared"
    document = {"started": started, "machine": machine, "engine_sha256": engine_sha(), "summary": s,
                "results": sorted(rows, key=lambda r: (r["kind"], r["model_type"]))}
    (out / "hf_generation_coverage.json").write_text(json.dumps(document, indent=1) + "\n")
    (out / "hf_generation_coverage.md").write_text(markdown(s, rows, started, machine))
    return s


# --- main --------------------------------------------------------------------------------------------------

def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--only", default="", help="model types, comma-separated")
    parser.add_argument("--limit", type=int, help="run at most N architectures not run before, per kind")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes (the torch threads split the cores)")
    parser.add_argument("--work", type=pathlib.Path, default=pathlib.Path("/tmp/hf_generation_coverage"))
    parser.add_argument("--out", type=pathlib.Path, default=ROOT / "benchmarks")
    parser.add_argument("--fresh", action="store_true", help="forget earlier results")
    parser.add_argument("--no-serve", action="store_true", help="verify in-process only (no tritonsm build/serve)")
    args = parser.parse_args()
    args.only = {t for t in args.only.split(",") if t}
    return args


def main() -> int:
    args = arguments()
    clock = time.monotonic()
    # The workers inherit these: nothing is fetched, and no progress bar per saved or loaded checkpoint.
    os.environ.update(HF_HUB_OFFLINE="1", HF_HUB_DISABLE_PROGRESS_BARS="1", TRANSFORMERS_VERBOSITY="error")
    args.work.mkdir(parents=True, exist_ok=True)
    store = args.work / "results.json"
    saved = json.loads(store.read_text()) if store.is_file() and not args.fresh else {}
    started = saved.get("started") or datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    results: dict[str, Row] = saved.get("results", {})
    taken: collections.Counter[str] = collections.Counter()
    todo = []
    for row in architectures():
        if row["key"] in results or (args.only and row["model_type"] not in args.only):
            continue
        if args.limit is None or taken[row["kind"]] < args.limit:
            todo.append(row)
            taken[row["kind"]] += 1
    say(clock, f"{len(results)} done before or listed; {len(todo)} to run with {args.jobs} job(s)")
    threads = max(1, (os.cpu_count() or 1) // args.jobs)
    with concurrent.futures.ProcessPoolExecutor(args.jobs, mp_context=multiprocessing.get_context("spawn"),
                                                initializer=_worker_start, initargs=(threads,)) as pool:
        futures = {pool.submit(check, row, args.work / "checkpoints" / entry_name(row)): row for row in todo}
        for done, future in enumerate(concurrent.futures.as_completed(futures), 1):
            try:
                row = future.result()
            except concurrent.futures.process.BrokenProcessPool:
                # A worker died in native code and took the pool with it: which row did is unknown, so none is
                # recorded; a rerun goes on from here (--jobs 1 names it).
                say(clock, f"the worker pool broke at {futures[future]['key']}; rerun to go on")
                break
            results[row["key"]] = row
            say(clock, f"[{done}/{len(todo)}] {row['kind']} {row['model_type']}: {row['outcome']}"
                       + (f" ({row['reason'][:200]})" if row.get("reason") else ""))
            store.write_text(json.dumps({"started": started, "results": results}, indent=1))
    if not args.no_serve:
        chosen = []
        for kind, first in SERVED.items():
            ok = [r for r in results.values() if r["kind"] == kind and r["outcome"] in (IDENTICAL, NEAR_TIE)
                  and (not args.only or r["model_type"] in args.only)]
            ok.sort(key=lambda r: (first.index(r["model_type"]) if r["model_type"] in first else len(first),
                                   r["model_type"]))
            chosen.extend(ok[:len(first)])
        if chosen:
            serve_subset(chosen, args.work, clock)
            store.write_text(json.dumps({"started": started, "results": results}, indent=1))
    s = write_reports(list(results.values()), started, args.out)
    print(json.dumps({k: {f: v for f, v in one.items() if not f.endswith("causes")} for k, one in s.items()},
                     indent=1), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
