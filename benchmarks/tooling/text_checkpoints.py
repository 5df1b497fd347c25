"""Tiny text checkpoints made offline for `task:` tests and benchmarks, each with a tokenizer of its real algorithm.

For the tests and the coverage benchmark (no hub access on the build machines): a transformers
architecture at a few thousand parameters, random weights (seed 0), and a tokenizer trained with
Hugging Face ``tokenizers`` on a small corpus, saved together as ``save_pretrained`` writes a checkpoint.

Algorithms: ``wordpiece`` (BERT: lower case, accents stripped, [CLS] a [SEP] b [SEP] with type ids),
``bpe-bytes`` (RoBERTa / GPT-2 byte-level BPE: <s> a </s></s> b </s>, offsets trimmed), ``unigram``
(XLM-R / T5 SentencePiece-style Metaspace). Imports torch and transformers (build and tests only).
"""
from __future__ import annotations

import pathlib
from typing import Any, Optional

CORPUS = (
    "a fine film truly moving and the actors were great",
    "crème brûlée à la carte naïve café façade ångström zürich",
    "i love it so much 😍 🔥 👍 the best day",
    "東京は雨です 今日はとても寒いですね 北京欢迎你",
    "hello world spaced lines upper case numbers 3.14159 and 2,048 people",
    "angela merkel met emmanuel macron in paris on monday",
    "who met macron where is the café what is the weather how many dogs",
    "the weather in tokyo is rainy and cold today there were people and dogs at the event",
) * 4
LABELS = {
    "text-classification": ["negative", "positive", "neutral"],
    "token-classification": ["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG", "I-ORG"],
}
SIZES = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64)


def tokenizer(algorithm: str, vocab_size: int = 400) -> Any:
    """A transformers fast tokenizer of ``algorithm``, trained on CORPUS."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    if algorithm == "wordpiece":
        specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
        tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
        tok.normalizer = normalizers.BertNormalizer(lowercase=True, strip_accents=True)
        tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        tok.decoder = decoders.WordPiece()
        trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=specials)
        tok.train_from_iterator(CORPUS, trainer)
        cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
        tok.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
        names = dict(pad_token="[PAD]", unk_token="[UNK]", cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]")
        inputs = ["input_ids", "token_type_ids", "attention_mask"]
    elif algorithm == "bpe-bytes":
        specials = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials,
                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
        tok.train_from_iterator(CORPUS, trainer)
        tok.post_processor = processors.RobertaProcessing(("</s>", tok.token_to_id("</s>")),
                                                          ("<s>", tok.token_to_id("<s>")), trim_offsets=True)
        names = dict(bos_token="<s>", eos_token="</s>", pad_token="<pad>", unk_token="<unk>", cls_token="<s>",
                     sep_token="</s>", mask_token="<mask>")
        inputs = ["input_ids", "attention_mask"]
    elif algorithm == "unigram":
        specials = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
        tok = Tokenizer(models.Unigram())
        tok.normalizer = normalizers.NFKC()
        tok.pre_tokenizer = pre_tokenizers.Metaspace()
        tok.decoder = decoders.Metaspace()
        trainer = trainers.UnigramTrainer(vocab_size=vocab_size, special_tokens=specials, unk_token="<unk>")
        tok.train_from_iterator(CORPUS, trainer)
        s, e = tok.token_to_id("<s>"), tok.token_to_id("</s>")
        tok.post_processor = processors.TemplateProcessing(
            single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>", special_tokens=[("<s>", s), ("</s>", e)])
        names = dict(bos_token="<s>", eos_token="</s>", pad_token="<pad>", unk_token="<unk>", cls_token="<s>",
                     sep_token="</s>", mask_token="<mask>")
        inputs = ["input_ids", "attention_mask"]
    else:
        raise ValueError(f"unknown tokenizer algorithm {algorithm!r}; one of wordpiece, bpe-bytes, unigram")
    return PreTrainedTokenizerFast(tokenizer_object=tok, model_input_names=inputs, model_max_length=512, **names)


def save(folder: pathlib.Path, task: str, family: str = "bert", algorithm: Optional[str] = None,
         sentence_transformers: bool = False) -> pathlib.Path:
    """A tiny ``family`` checkpoint for ``task`` (a tasks.TaskKind value) with its tokenizer, in ``folder``."""
    import torch
    import transformers

    algorithm = algorithm or {"bert": "wordpiece", "roberta": "bpe-bytes", "xlm-roberta": "unigram"}[family]
    tok = tokenizer(algorithm)
    config = transformers.AutoConfig.for_model(family, vocab_size=len(tok), max_position_embeddings=600,
                                               pad_token_id=tok.pad_token_id, **SIZES)
    labels = LABELS.get(task)
    if labels:
        config.id2label = dict(enumerate(labels))
        config.label2id = {v: k for k, v in config.id2label.items()}
    auto = {"text-classification": transformers.AutoModelForSequenceClassification,
            "token-classification": transformers.AutoModelForTokenClassification,
            "question-answering": transformers.AutoModelForQuestionAnswering,
            "sentence-embedding": transformers.AutoModel}[task]
    torch.manual_seed(0)
    model = auto.from_config(config).eval()
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    if sentence_transformers:
        from sentence_transformers import SentenceTransformer, models as st_models

        encoder = st_models.Transformer(str(folder), max_seq_length=64)
        pooling = st_models.Pooling(encoder.get_embedding_dimension(), pooling_mode="cls")
        dense = st_models.Dense(encoder.get_embedding_dimension(), 16, activation_function=torch.nn.Tanh())
        SentenceTransformer(modules=[encoder, pooling, dense, st_models.Normalize()], device="cpu").save(str(folder))
    return folder
