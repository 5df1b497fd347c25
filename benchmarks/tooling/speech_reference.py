"""What transformers itself transcribes from a clip, as a served speech model's streamed text must read: greedy
``generate`` on the checkpoint's own inputs (a speech encoder-decoder: its feature extractor's; an audio language
model: its processor's transcription request; a streaming model: its processor's plain call), the new tokens decoded
without special tokens. For Qwen3-ASR the text after ``<asr_text>`` where the model writes it (the engine leaves out
its "language <NAME>" header)."""
from __future__ import annotations

import io
import pathlib
from typing import Any, Optional

from model_build.python_models.step_fed import STEP_FED_TYPES
from model_build.python_models.transcription_request import ANSWER_AFTER, PREFILL_EXTRA, REQUEST_EXTRA


def transcript(folder: pathlib.Path, wav: bytes, max_new_tokens: int, **asked: Any) -> str:
    import soundfile

    samples, rate = soundfile.read(io.BytesIO(wav), dtype="float32")
    new, tokenizer, answer_after = new_tokens(folder, samples, rate, max_new_tokens, **asked)
    if answer_after is not None and answer_after in new:
        new = new[new.index(answer_after) + 1:]
    return str(tokenizer.decode(new, skip_special_tokens=True))


def new_tokens(folder: pathlib.Path, samples: Any, rate: int, max_new_tokens: int,
               **asked: Any) -> tuple[list[int], Any, Optional[int]]:
    """generate's new tokens for one clip (mono float32 at ``rate``), the tokenizer, and the token the transcript
    follows (None where the model writes no header)."""
    import torch
    import transformers

    model = transformers.AutoModelForSpeechSeq2Seq.from_pretrained(folder).eval()
    model_type = str(model.config.model_type)
    if model.config.is_encoder_decoder:
        extractor = transformers.AutoFeatureExtractor.from_pretrained(folder)
        tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
        name = model.get_encoder().main_input_name
        prompt = asked.pop("prompt", None)  # a Whisper request's text before the clip: generate's prompt_ids
        if prompt is not None:
            asked["prompt_ids"] = torch.tensor(tokenizer.get_prompt_ids(prompt, return_tensors="np"))
        with torch.no_grad():
            out = model.generate(**{name: extractor(samples, sampling_rate=rate, return_tensors="pt")[name]},
                                 do_sample=False, max_new_tokens=max_new_tokens, **asked)[0]
        # Whisper's short-form generate returns the new tokens; the others put the decoder's start token first.
        return [int(t) for t in (out if model_type == "whisper" else out[1:])], tokenizer, None
    processor = transformers.AutoProcessor.from_pretrained(folder)
    wanted = int(processor.feature_extractor.sampling_rate)
    if rate != wanted:
        raise ValueError(f"the clip is at {rate} Hz; write it at the processor's {wanted} Hz (the server resamples, "
                         "this reference does not)")
    if model_type in STEP_FED_TYPES:  # reads the clip as it goes; Kyutai's processor writes no prompt (generate: <s>)
        inputs = processor(audio=samples, sampling_rate=rate, return_tensors="pt")
        prompt = inputs["input_ids"].shape[1] if "input_ids" in inputs else 1
    else:
        extra = REQUEST_EXTRA.get(model_type)  # Voxtral's: the audio format and a model name for mistral_common
        inputs = processor.apply_transcription_request(
            audio=samples, **({**extra, "sampling_rate": rate} if extra is not None else {}), **asked)
        prompt = inputs["input_ids"].shape[1]
    with torch.no_grad():
        out = model.generate(**inputs, do_sample=False, max_new_tokens=max_new_tokens,
                             **PREFILL_EXTRA.get(model_type, {}))[0]
    marker = processor.tokenizer.get_vocab().get(ANSWER_AFTER.get(model_type, ""))
    return [int(t) for t in out[prompt:]], processor.tokenizer, marker
