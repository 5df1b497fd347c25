"""Tiny sequence-to-sequence speech checkpoints other than Whisper (generation_checkpoints.save_whisper): each model
type transformers 5.23.0 maps for AutoModelForSpeechSeq2Seq whose encoder reads a clip and whose decoder writes text
from a start token, at 2 layers and width 32, with the byte-level tokenizer trained offline and the model's own
feature extractor class, saved as save_pretrained writes them. What the speech tests and the coverage benchmark
build; random weights drawn wide (as generation_checkpoints.WANDER) so the decoders wander through tokens."""
from __future__ import annotations

import pathlib
from typing import Any, Callable

from benchmarks.tooling.generation_checkpoints import tokenizer

IDS = dict(bos_token_id=0, pad_token_id=1, eos_token_id=2, decoder_start_token_id=2)
LAYERS = dict(num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=2, hidden_size=32, intermediate_size=64)
SEQ2SEQ_LAYERS = dict(encoder_layers=2, decoder_layers=2, encoder_attention_heads=2, decoder_attention_heads=2,
                      encoder_ffn_dim=64, decoder_ffn_dim=64)
CONV = dict(conv_dim=(32, 32), conv_stride=(5, 2), conv_kernel=(10, 3), num_conv_pos_embeddings=16,
            num_conv_pos_embedding_groups=2)


def _speech_to_text(t: Any, vocab: int) -> tuple[Any, Any]:
    return (t.Speech2TextConfig(vocab_size=vocab, d_model=32, conv_channels=32, input_feat_per_channel=80,
                                max_source_positions=600, max_target_positions=64, **SEQ2SEQ_LAYERS, **IDS),
            t.Speech2TextFeatureExtractor(feature_size=80, num_mel_bins=80))


def _speecht5(t: Any, vocab: int) -> tuple[Any, Any]:
    return (t.SpeechT5Config(vocab_size=vocab, hidden_size=32, max_text_positions=64, max_speech_positions=600,
                             **SEQ2SEQ_LAYERS, **CONV, **IDS), t.SpeechT5FeatureExtractor())


def _moonshine(t: Any, vocab: int) -> tuple[Any, Any]:
    config = t.MoonshineConfig(vocab_size=vocab, hidden_size=32, intermediate_size=64, encoder_num_hidden_layers=2,
                               decoder_num_hidden_layers=2, encoder_num_attention_heads=2,
                               decoder_num_attention_heads=2, max_position_embeddings=256, **IDS)
    return config, t.Wav2Vec2FeatureExtractor(feature_size=1, sampling_rate=16000, do_normalize=False,
                                              return_attention_mask=True)


def _moonshine_streaming(t: Any, vocab: int) -> tuple[Any, Any]:
    config = t.MoonshineStreamingConfig(encoder_config=dict(head_dim=16, **LAYERS), vocab_size=vocab, head_dim=16,
                                        max_position_embeddings=256, **LAYERS, **IDS)
    return config, t.Wav2Vec2FeatureExtractor(feature_size=1, sampling_rate=16000, return_attention_mask=True)


def _speech_encoder_decoder(t: Any, vocab: int) -> tuple[Any, Any]:
    encoder = t.Wav2Vec2Config(vocab_size=vocab, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                               intermediate_size=64, **CONV)
    decoder = t.BertConfig(vocab_size=vocab, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                           intermediate_size=64, is_decoder=True, add_cross_attention=True,
                           max_position_embeddings=64, pad_token_id=1)
    config = t.SpeechEncoderDecoderConfig.from_encoder_decoder_configs(encoder, decoder)
    for key, value in IDS.items():
        setattr(config, key, value)
    return config, t.Wav2Vec2FeatureExtractor(feature_size=1, sampling_rate=16000, return_attention_mask=True)


def _parakeet_encoder() -> dict[str, Any]:
    return dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2, num_mel_bins=80,
                subsampling_conv_channels=32)


def _canary(t: Any, vocab: int) -> tuple[Any, Any]:
    decoder = dict(vocab_size=vocab, max_position_embeddings=256, **LAYERS)
    return (t.CanaryConfig(encoder_config=_parakeet_encoder(), decoder_config=decoder, vocab_size=vocab, **IDS),
            t.ParakeetFeatureExtractor(feature_size=80))


def _cohere_asr(t: Any, vocab: int) -> tuple[Any, Any]:
    return (t.CohereAsrConfig(encoder_config=_parakeet_encoder(), vocab_size=vocab, max_position_embeddings=256,
                              head_dim=16, **LAYERS, **IDS), t.ParakeetFeatureExtractor(feature_size=80))


def _seamless(version: str) -> Callable[[Any, int], tuple[Any, Any]]:
    def make(t: Any, vocab: int) -> tuple[Any, Any]:
        sizes = dict(vocab_size=vocab, hidden_size=32, speech_encoder_layers=2, speech_encoder_attention_heads=2,
                     speech_encoder_intermediate_size=64, feature_projection_input_dim=160, adaptor_kernel_size=8,
                     adaptor_stride=8, max_position_embeddings=256, t2u_vocab_size=50, **SEQ2SEQ_LAYERS, **IDS)
        config = (t.SeamlessM4TConfig(**sizes) if version == "v1" else
                  t.SeamlessM4Tv2Config(char_vocab_size=50, **sizes))
        return config, t.SeamlessM4TFeatureExtractor()
    return make


MAKERS: dict[str, Callable[[Any, int], tuple[Any, Any]]] = {
    "speech_to_text": _speech_to_text, "speecht5": _speecht5, "moonshine": _moonshine,
    "moonshine_streaming": _moonshine_streaming, "speech-encoder-decoder": _speech_encoder_decoder,
    "canary": _canary, "cohere_asr": _cohere_asr, "seamless_m4t": _seamless("v1"), "seamless_m4t_v2": _seamless("v2")}


# The weight scale (times fan-in^-1/2) at which each type's decoder writes several tokens on the three synthetic clips
# (measured at 2, 4 and 8 on seed 0; the others: 2).
SCALE = {"speech-encoder-decoder": 8.0, "seamless_m4t": 8.0, "seamless_m4t_v2": 8.0, "canary": 4.0,
         "cohere_asr": 4.0, "moonshine": 4.0}


def save(folder: pathlib.Path, model_type: str, seed: int = 0) -> pathlib.Path:
    """A tiny random ``model_type`` speech-to-text checkpoint in ``folder``: weights, the tokenizer, the feature
    extractor (preprocessor_config.json) and a generation_config.json with the start, pad and end ids."""
    import torch
    import transformers

    tok = tokenizer()
    config, extractor = MAKERS[model_type](transformers, len(tok))
    torch.manual_seed(seed)
    model = transformers.AutoModelForSpeechSeq2Seq.from_config(config).eval()
    with torch.no_grad():
        for parameter in model.parameters():
            if parameter.ndim >= 2:
                parameter.normal_(0, SCALE.get(model_type, 2.0) / parameter.shape[-1] ** 0.5)
    model.generation_config = transformers.GenerationConfig(**IDS)
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    extractor.save_pretrained(folder)
    return folder
