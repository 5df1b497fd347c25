"""Tiny audio language models (one decoder reading a clip inside a text prompt) that transformers 5.23.0 maps for
AutoModelForSpeechSeq2Seq and the generation engine serves through the checkpoint's own processor
(``apply_transcription_request``): each at 2 layers and width 32, a byte-level BPE tokenizer trained offline that
holds the processor's special tokens, a chat template that renders an audio item as the processor expects, and the
processor saved beside the weights (what ``AutoProcessor.from_pretrained`` loads). Real checkpoints ship richer
templates; the mechanics (audio placeholders expanded, features merged at prefill) are the same. Random weights drawn
wide (8 x fan-in^-1/2) so the decoders wander through tokens."""
from __future__ import annotations

import pathlib
from typing import Any, Callable

from benchmarks.tooling.generation_checkpoints import byte_level_bpe

# Qwen-style turns; an audio item as the processor's placeholder run (Qwen3ASRProcessor expands <|audio_pad|>).
QWEN3_ASR_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n"
    "{% if m['content'] is string %}{{ m['content'] }}{% else %}{% for c in m['content'] %}"
    "{% if c['type'] == 'audio' %}<|audio_start|><|audio_pad|><|audio_end|>"
    "{% elif c['type'] == 'text' %}{{ c['text'] }}{% endif %}{% endfor %}{% endif %}"
    "{% if not loop.last or m['role'] != 'assistant' %}<|im_end|>\n{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
# VibeVoiceAsrProcessor expands <|box_start|> and fills in <|AUDIO_DURATION|>.
VIBEVOICE_ASR_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n"
    "{% if m['content'] is string %}{{ m['content'] }}{% else %}{% for c in m['content'] %}"
    "{% if c['type'] == 'audio' %}<|object_ref_start|><|box_start|><|object_ref_end|>\nThis is a <|AUDIO_DURATION|> "
    "seconds audio, please transcribe it{% elif c['type'] == 'text' %} with context: {{ c['text'] }}{% endif %}"
    "{% endfor %}{% endif %}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
SCALE = 8.0


def _tokenizer(specials: list[str], template: str, **named: str) -> Any:
    """Byte-level BPE of 300 tokens after ``specials`` (ids 0.. in order); <|im_end|> ends, <|endoftext|> pads;
    ``named`` become tokenizer attributes (audio_token...)."""
    import transformers

    tok = byte_level_bpe(specials, 300 + len(specials), ("language English", "transcribe the speech"))
    fast = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>", model_max_length=100000,
        padding_side="left", **({"extra_special_tokens": named} if named else {}))
    fast.chat_template = template
    return fast


def _decoder(vocab: int) -> dict[str, Any]:
    return dict(vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                num_key_value_heads=1, head_dim=16, max_position_embeddings=4096)


def _qwen3_asr(t: Any, _folder: pathlib.Path) -> tuple[Any, Any, dict[str, Any]]:
    tok = _tokenizer(["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|audio_start|>", "<|audio_end|>",
                      "<|audio_pad|>", "<asr_text>", "<timestamp>"], QWEN3_ASR_TEMPLATE,
                     audio_token="<|audio_pad|>", audio_bos_token="<|audio_start|>", audio_eos_token="<|audio_end|>")
    ids = dict(pad_token_id=0, eos_token_id=[0, 2])
    config = t.Qwen3ASRConfig(
        audio_config=dict(num_mel_bins=128, encoder_layers=2, encoder_attention_heads=2, encoder_ffn_dim=64,
                          d_model=32, output_dim=32, downsample_hidden_size=16),
        text_config=dict(model_type="qwen3", tie_word_embeddings=True, **_decoder(len(tok))),
        audio_token_id=tok.convert_tokens_to_ids("<|audio_pad|>"), timestamp_token_id=7, **ids)
    processor = t.Qwen3ASRProcessor(feature_extractor=t.Qwen3ASRFeatureExtractor(feature_size=128), tokenizer=tok,
                                    chat_template=QWEN3_ASR_TEMPLATE)
    return config, processor, ids


def _vibevoice_asr(t: Any, _folder: pathlib.Path) -> tuple[Any, Any, dict[str, Any]]:
    tok = _tokenizer(["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
                      "<|box_start|>"], VIBEVOICE_ASR_TEMPLATE)
    ids = dict(pad_token_id=0, eos_token_id=2)
    # The smallest acoustic encoders that keep the real hop (3,200 samples at 24 kHz per audio token).
    encoder = dict(hidden_size=8, num_filters=4, depths=[1] * 7, downsampling_ratios=[2, 2, 4, 5, 5, 8])
    config = t.VibeVoiceAsrConfig(acoustic_tokenizer_encoder_config=dict(encoder),
                                  semantic_tokenizer_encoder_config=dict(encoder),
                                  text_config=dict(model_type="qwen2", **_decoder(len(tok))),
                                  audio_token_id=5, audio_bos_token_id=3, audio_eos_token_id=4, **ids)
    processor = t.VibeVoiceAsrProcessor(feature_extractor=t.VibeVoiceAcousticTokenizerFeatureExtractor(),
                                        tokenizer=tok, chat_template=VIBEVOICE_ASR_TEMPLATE)
    return config, processor, ids


def _kyutai_speech_to_text(t: Any, _folder: pathlib.Path) -> tuple[Any, Any, dict[str, Any]]:
    """Kyutai's streaming model: a decoder reading, at each step, its text token and the next 80 ms frame's codes
    from a Mimi codec (the smallest codec that keeps the real 1,920-sample frame at 24 kHz). Its generation_config
    names no end token (the clip's last frame ends generate), and its text pads with pad_token_id."""
    tok = _tokenizer(["<unk>", "<s>", "</s>", "<pad>"], "")
    ids = dict(pad_token_id=3, bos_token_id=1)
    codec = dict(hidden_size=32, num_filters=8, num_residual_layers=1, codebook_size=64, codebook_dim=16,
                 num_quantizers=4, num_semantic_quantizers=1, vector_quantization_hidden_dimension=16,
                 num_hidden_layers=1, intermediate_size=32, num_attention_heads=2, num_key_value_heads=2, head_dim=16,
                 upsampling_ratios=[8, 6, 5, 4], upsample_groups=32)
    config = t.KyutaiSpeechToTextConfig(
        codebook_vocab_size=65, vocab_size=len(tok), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=2, head_dim=16, ffn_dim=64, num_codebooks=4, audio_bos_token_id=64,
        audio_pad_token_id=65 * 4, codec_config=codec, **ids)
    processor = t.KyutaiSpeechToTextProcessor(feature_extractor=t.KyutaiSpeechToTextFeatureExtractor(), tokenizer=tok)
    return config, processor, ids


# Voxtral's special tokens where mistral_common's tekken files put them (VoxtralProcessor takes [AUDIO] as id 24; its
# v7 instruct tokenizer looks the tool and system tokens up too); the ids between are fillers, as in the real files.
VOXTRAL_SPECIALS = {0: "<unk>", 1: "<s>", 2: "</s>", 3: "[INST]", 4: "[/INST]", 5: "[AVAILABLE_TOOLS]",
                    6: "[/AVAILABLE_TOOLS]", 7: "[TOOL_RESULTS]", 8: "[/TOOL_RESULTS]", 9: "[TOOL_CALLS]", 10: "[IMG]",
                    11: "<pad>", 12: "[IMG_BREAK]", 13: "[IMG_END]", 14: "[PREFIX]", 15: "[MIDDLE]", 16: "[SUFFIX]",
                    17: "[SYSTEM_PROMPT]", 18: "[/SYSTEM_PROMPT]", 19: "[TOOL_CONTENT]", 24: "[AUDIO]",
                    25: "[BEGIN_AUDIO]", 34: "[TRANSCRIBE]"}
# tiktoken's split pattern as the tekken files give it.
TEKKEN_PATTERN = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|"
                  r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}|"
                  r" ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def _tekken(folder: pathlib.Path, specials: dict[int, str], count: int, merges: tuple[str, ...],
            audio: dict[str, Any]) -> int:
    """A mistral_common tekken.json (what MistralCommonBackend loads): ``count`` special tokens (``specials`` at their
    ids, fillers between), the 256 bytes and ``merges`` as ranked tiktoken tokens, the audio section; its size."""
    import base64
    import json

    pieces = [bytes([i]) for i in range(256)] + [m.encode() for m in merges]
    vocab = [{"rank": i, "token_bytes": base64.b64encode(p).decode(), "token_str": p.decode(errors="replace")}
             for i, p in enumerate(pieces)]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tekken.json").write_text(json.dumps({
        "config": {"pattern": TEKKEN_PATTERN, "num_vocab_tokens": len(vocab), "default_vocab_size": len(vocab) + count,
                   "default_num_special_tokens": count, "version": "v7"},
        "vocab": vocab, "version": 1, "type": "Tekken", "audio": audio,
        "special_tokens": [{"rank": i, "token_str": specials.get(i, f"<SPECIAL_{i}>"), "is_control": True}
                           for i in range(count)]}))
    return len(vocab) + count


def _voxtral(t: Any, folder: pathlib.Path) -> tuple[Any, Any, dict[str, Any]]:
    """Voxtral: a Whisper-like encoder whose frames are stacked four to one (the projector reshapes by the encoder's
    intermediate_size, 4 x d_model) into a Llama decoder; its tokenizer is mistral_common's tekken (tekken.json), which
    its processor writes the transcription request with: [INST][BEGIN_AUDIO][AUDIO] x 375 per 30 s[/INST]
    (lang:xx)[TRANSCRIBE]."""
    size = _tekken(folder, VOXTRAL_SPECIALS, 40, ("th", "he", "in", "en", "an", " t", "er", "la", "ng"),
                   {"sampling_rate": 16000, "frame_rate": 12.5, "chunk_length_s": 30.0,
                    "audio_encoding_config": {"num_mel_bins": 128, "hop_length": 160, "window_size": 400}})
    tok = t.MistralCommonBackend.from_pretrained(str(folder))
    ids = dict(bos_token_id=1, eos_token_id=2, pad_token_id=11)
    config = t.VoxtralConfig(
        audio_config=dict(num_mel_bins=128, encoder_layers=2, encoder_attention_heads=2, intermediate_size=128,
                          d_model=32, max_source_positions=1500),
        text_config=dict(model_type="llama", **_decoder(size)), audio_token_id=24)
    processor = t.VoxtralProcessor(feature_extractor=t.WhisperFeatureExtractor(feature_size=128), tokenizer=tok)
    return config, processor, ids


def _voxtral_realtime(t: Any, folder: pathlib.Path) -> tuple[Any, Any, dict[str, Any]]:
    """Voxtral Realtime: a causal audio encoder whose output each decoding step reads a slice of (four frames per
    token, 80 ms), into a Mistral decoder; its tekken.json is a streaming one (delay, look-ahead and look-back, the
    left padding tokens), and its processor writes the prompt (<s> and [STREAMING_PAD]s) with mistral_common."""
    specials = {**VOXTRAL_SPECIALS, 32: "[STREAMING_PAD]", 33: "[STREAMING_WORD]"}
    size = _tekken(folder, specials, 40, ("th", "he", "in", "en", "an", " t", "er", "la", "ng"),
                   {"sampling_rate": 16000, "frame_rate": 12.5, "transcription_format": "streaming",
                    "transcription_delay_ms": 480, "streaming_look_ahead_ms": 2.5, "streaming_look_back_ms": 52.5,
                    "streaming_n_left_pad_tokens": 32,
                    "audio_encoding_config": {"num_mel_bins": 128, "hop_length": 160, "window_size": 400}})
    tok = t.MistralCommonBackend.from_pretrained(str(folder))
    ids = dict(bos_token_id=1, eos_token_id=2)
    decoder = {**_decoder(size), "sliding_window": 4096}
    config = t.VoxtralRealtimeConfig(
        audio_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                          head_dim=16, num_mel_bins=128, sliding_window=750), text_config=decoder)
    processor = t.VoxtralRealtimeProcessor(feature_extractor=t.VoxtralRealtimeFeatureExtractor(feature_size=128),
                                           tokenizer=tok)
    return config, processor, ids


MAKERS: dict[str, Callable[[Any, pathlib.Path], tuple[Any, Any, dict[str, Any]]]] = {
    "qwen3_asr": _qwen3_asr, "vibevoice_asr": _vibevoice_asr, "voxtral": _voxtral,
    "kyutai_speech_to_text": _kyutai_speech_to_text, "voxtral_realtime": _voxtral_realtime}


def save(folder: pathlib.Path, model_type: str, seed: int = 0) -> pathlib.Path:
    """A tiny random ``model_type`` audio language model in ``folder``: weights, generation_config.json (end and pad
    ids) and the processor (tokenizer, chat template, feature extractor)."""
    import torch
    import transformers

    config, processor, ids = MAKERS[model_type](transformers, folder)
    torch.manual_seed(seed)
    model = transformers.AutoModelForSpeechSeq2Seq.from_config(config).eval()
    with torch.no_grad():
        for parameter in model.parameters():
            if parameter.ndim >= 2:
                parameter.normal_(0, SCALE / parameter.shape[-1] ** 0.5)
    model.generation_config = transformers.GenerationConfig(**ids)
    model.save_pretrained(folder)
    processor.save_pretrained(folder)
    return folder
