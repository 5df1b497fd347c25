"""Small tokenizers built locally and deterministically, for builds without downloaded weights.

No hub access: a BERT-style WordPiece vocabulary (vocab.txt) and a T5-style Unigram tokenizer
(tokenizer.json) are assembled from a fixed word list, so two builds give identical files.
Real deployments pass a weights directory that holds the model's own tokenizer files.
"""
from __future__ import annotations

import string

BERT_SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
T5_SPECIALS = ("<pad>", "</s>", "<unk>")
WORDS = """the of and to in is was for on that with as by it from at are this be an or which his her
their has have had not were but they all one two three new first after also more other most some such
when there been into time would can will could about only over than then these may up out so what
who where how many much each very good great best well long high small large model models text
translate english german french summarize question answer hello world test input output data
learning machine deep neural network language sentence word words token tokens image images inference
server triton endpoint request response batch fast slow latency throughput gpu cpu memory cloud
amazon sagemaker deploy deployment classify classification positive negative review movie film
book story day days year years people person city country house water food music game play
""".split()


def bert_vocab() -> list[str]:
    """WordPiece vocabulary: specials, characters, '##'-continuations, then whole words."""
    chars = list(string.ascii_lowercase + string.digits + string.punctuation)
    vocab = list(BERT_SPECIALS) + chars + [f"##{c}" for c in string.ascii_lowercase + string.digits]
    vocab += [w for w in dict.fromkeys(WORDS) if w not in vocab]
    return vocab


def bert_vocab_text() -> str:
    return "\n".join(bert_vocab()) + "\n"


def t5_tokenizer_json() -> str:
    """A Unigram tokenizer with T5's special ids (pad 0, eos 1, unk 2), serialised by `tokenizers`."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

    pieces = [(s, 0.0) for s in T5_SPECIALS]
    chars = string.ascii_letters + string.digits + string.punctuation
    # Longer pieces score higher so whole words win over character splits.
    pieces += [(f"\u2581{w}", -2.0 - 1.0 / len(w)) for w in dict.fromkeys(WORDS)]
    pieces += [(f"\u2581{c}", -8.0) for c in chars] + [(c, -10.0) for c in chars] + [("\u2581", -12.0)]
    tok = Tokenizer(models.Unigram(pieces, unk_id=2, byte_fallback=False))
    tok.normalizer = normalizers.NFKC()
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always")
    tok.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="always")
    tok.post_processor = processors.TemplateProcessing(single="$A </s>", pair="$A </s> $B </s>",
                                                       special_tokens=[("</s>", 1)])
    tok.add_special_tokens(list(T5_SPECIALS))  # already in the vocabulary: marks them special, same ids
    return tok.to_str(pretty=True) + "\n"
