"""Tiny generating checkpoints with a real tokenizer trained offline (byte-level BPE, GPT-2's algorithm, on the
tooling's shared corpus): what the generation tests, the served-generation tests and the speed benchmark save with
``save_pretrained``. Random weights drawn wide enough that the models wander through several tokens (at the default
initialisation a random model repeats one), so a wrong position or cache shows in the tokens."""
from __future__ import annotations

import json
import pathlib
from typing import Any, Optional

from benchmarks.tooling.text_checkpoints import CORPUS

SEQ2SEQ = frozenset({"t5", "bart"})
# A chat template of the Jinja kind transformers applies (tokenizer_config.json chat_template).
CHAT_TEMPLATE = ("{% for m in messages %}<s>{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
                 "{% if add_generation_prompt %}<s>assistant:{% endif %}")
# Encoder-decoders repeat one token at any configured initialisation; each matrix drawn at this scale (times
# fan-in^-1/2) makes them cycle through several.
WANDER = {"t5": 1.0, "bart": 4.0}


def byte_level_bpe(specials: list[str], vocab_size: int = 300, extra: tuple[str, ...] = ()) -> Any:
    """A byte-level BPE (GPT-2's algorithm) trained on the tooling's corpus and ``extra``: ``specials`` take ids 0..
    in order; ``vocab_size`` counts them."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator([*CORPUS, *extra], trainer)
    return tok


def tokenizer() -> Any:
    """Byte-level BPE of 300 tokens: <s> 0, <pad> 1, </s> 2, <unk> 3."""
    import transformers

    return transformers.PreTrainedTokenizerFast(tokenizer_object=byte_level_bpe(["<s>", "<pad>", "</s>", "<unk>"]),
                                                bos_token="<s>", pad_token="<pad>", eos_token="</s>",
                                                unk_token="<unk>", model_max_length=256)


def config(family: str, vocab: int) -> Any:
    """2 layers, hidden 32, for gpt2, llama, qwen2, mistral, t5 or bart."""
    import transformers

    ids = dict(bos_token_id=0, pad_token_id=1, eos_token_id=2)
    if family == "gpt2":
        return transformers.GPT2Config(vocab_size=vocab, n_positions=256, n_embd=32, n_layer=2, n_head=2,
                                       initializer_range=0.3, **ids)
    decoder = dict(vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                   num_key_value_heads=1, max_position_embeddings=256, initializer_range=0.3, **ids)
    if family in ("llama", "qwen2"):
        return (transformers.LlamaConfig if family == "llama" else transformers.Qwen2Config)(**decoder)
    if family == "mistral":
        # A window (16 tokens) shorter than some prompts: those decode in a batch of their own, the shorter ones
        # join the shared batch and go on past the window there.
        return transformers.MistralConfig(sliding_window=16, **decoder)
    if family == "t5":
        return transformers.T5Config(vocab_size=vocab, d_model=32, d_kv=16, d_ff=64, num_layers=2, num_heads=2,
                                     decoder_start_token_id=1, **ids)
    if family == "bart":
        return transformers.BartConfig(vocab_size=vocab, d_model=32, encoder_layers=2, decoder_layers=2,
                                       encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64,
                                       decoder_ffn_dim=64, max_position_embeddings=256, decoder_start_token_id=2,
                                       forced_eos_token_id=None, **ids)
    raise ValueError(f"no tiny configuration for {family!r}")


def save(folder: pathlib.Path, family: str, chat_template: Optional[str] = None, seed: int = 0) -> pathlib.Path:
    """A tiny random ``family`` checkpoint and its tokenizer, as save_pretrained writes them, in ``folder``."""
    import torch
    import transformers

    tok = tokenizer()
    if chat_template is not None:
        tok.chat_template = chat_template
    torch.manual_seed(seed)
    auto = transformers.AutoModelForSeq2SeqLM if family in SEQ2SEQ else transformers.AutoModelForCausalLM
    model = auto.from_config(config(family, len(tok))).eval()
    if family in WANDER:
        with torch.no_grad():
            for parameter in model.parameters():
                if parameter.ndim >= 2:
                    parameter.normal_(0, WANDER[family] / parameter.shape[-1] ** 0.5)
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


# Whisper's special tokens, in the order its vocabularies carry them (a tiny subset of the 99 languages).
WHISPER_LANGUAGES = ("<|en|>", "<|fr|>", "<|de|>")
WHISPER_SPECIALS = ("<|endoftext|>", "<|startoftranscript|>", *WHISPER_LANGUAGES, "<|translate|>", "<|transcribe|>",
                    "<|startoflm|>", "<|startofprev|>", "<|nospeech|>", "<|notimestamps|>")


def save_whisper(folder: pathlib.Path, multilingual: bool = True, seed: int = 0) -> pathlib.Path:
    """A tiny random Whisper (d_model 32, 2 layers, the real 80 mel bins and 30 s window: 3000 frames, 1500 encoder
    positions), the byte-level tokenizer above with Whisper's special tokens, WhisperFeatureExtractor and a
    generation_config.json shaped like openai/whisper-*'s: decoder_start_token_id, lang_to_id and task_to_id
    (multilingual: no language set, so generate detects it), no_timestamps_token_id, suppress_tokens and
    begin_suppress_tokens."""
    import torch
    import transformers

    tok = tokenizer()
    # As openai/whisper-*: <|endoftext|> is its bos, eos, unk and pad, and the special tokens come after the text's
    # (WhisperTokenizer.get_prompt_ids refuses a prompt's ids from the first special one on).
    tok.add_special_tokens({"additional_special_tokens": list(WHISPER_SPECIALS), "bos_token": "<|endoftext|>",
                            "eos_token": "<|endoftext|>", "unk_token": "<|endoftext|>", "pad_token": "<|endoftext|>"})
    ids = {token: tok.convert_tokens_to_ids(token) for token in WHISPER_SPECIALS}
    eos, start = ids["<|endoftext|>"], ids["<|startoftranscript|>"]
    config = transformers.WhisperConfig(
        vocab_size=len(tok), num_mel_bins=80, d_model=32, encoder_layers=2, decoder_layers=2,
        encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64,
        max_source_positions=1500, max_target_positions=64, pad_token_id=eos, bos_token_id=eos, eos_token_id=eos,
        decoder_start_token_id=start, begin_suppress_tokens=None, suppress_tokens=None)
    torch.manual_seed(seed)
    model = transformers.WhisperForConditionalGeneration(config).eval()
    with torch.no_grad():  # wide weights: the tiny decoder wanders through several tokens (as WANDER above)
        for parameter in model.parameters():
            if parameter.ndim >= 2:
                parameter.normal_(0, 2.0 / parameter.shape[-1] ** 0.5)
    generation = transformers.GenerationConfig(
        decoder_start_token_id=start, eos_token_id=eos, pad_token_id=eos, bos_token_id=eos, max_length=64,
        no_timestamps_token_id=ids["<|notimestamps|>"], is_multilingual=multilingual,
        suppress_tokens=[ids["<|startoflm|>"], ids["<|startofprev|>"], 5, 7],
        begin_suppress_tokens=[tok.convert_tokens_to_ids("\u0120"), eos])
    if multilingual:
        generation.lang_to_id = {language: ids[language] for language in WHISPER_LANGUAGES}
        generation.task_to_id = {"translate": ids["<|translate|>"], "transcribe": ids["<|transcribe|>"]}
    else:  # English-only checkpoints carry no language or task tokens in their prompt
        generation.forced_decoder_ids = None
    model.generation_config = generation
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    saved = json.loads((folder / "tokenizer_config.json").read_text())
    (folder / "tokenizer_config.json").write_text(json.dumps({**saved, "tokenizer_class": "WhisperTokenizer"}))
    transformers.WhisperFeatureExtractor(feature_size=80).save_pretrained(folder)
    return folder
