"""A text far longer than the model reads, through the text tasks' tokenizer step (hf_tokenize.Tokenize): the time
to tokenize it whole (before) and cut before tokenizing (after), medians of --runs, in the same run.

    .venv/bin/python benchmarks/long_text_tokenize.py [--megabytes 5] [--runs 5] [--out benchmarks]

The tokenizers are the three algorithms of benchmarks/tooling/text_checkpoints (WordPiece, byte-level BPE,
Unigram) at sequence_length 512; the text is words and punctuation with accents, emoji and CJK. "whole" is the
same step with the cut turned off. Writes long_text_tokenize.json and .md.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import random
import statistics
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
WORDS = ["the", "film", "was", "truly", "moving,", "Crème", "brûlée", "😍", "东京", "don't", "—", "a", "fine", "end."]


def text_of(megabytes: float) -> str:
    rng = random.Random(0)
    parts, size = [], 0
    while size < megabytes * 1_000_000:
        word = rng.choice(WORDS)
        parts.append(word)
        size += len(word.encode()) + 1
    return " ".join(parts)


def median_seconds(run, runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=float, default=5.0)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--out", type=pathlib.Path, default=ROOT / "benchmarks")
    args = parser.parse_args()
    from benchmarks.tooling import text_checkpoints
    from model_build.python_models import hf_tokenize

    text = text_of(args.megabytes)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for family in ("bert", "roberta", "xlm-roberta"):
            folder = text_checkpoints.save(pathlib.Path(tmp) / family, "text-classification", family)
            step = hf_tokenize.Tokenize(str(folder / "tokenizer.json"), {"max_length": "512"})
            whole = hf_tokenize.Tokenize(str(folder / "tokenizer.json"), {"max_length": "512"})
            whole.cut_before_tokenizing = lambda t: t  # type: ignore[method-assign]  # the step before the cut
            print(f"{family}: {args.megabytes:g} MB, {args.runs} runs each ...", flush=True)
            after = median_seconds(lambda: step.encode([text]), args.runs)
            before = median_seconds(lambda: whole.encode([text]), args.runs)
            same = (step.encode([text])["input_ids"] == whole.encode([text])["input_ids"]).all()
            rows.append({"tokenizer": family, "whole_s": round(before, 4), "cut_s": round(after, 4),
                         "speed_up": round(before / after, 1), "same_tokens": bool(same)})
            print(f"  whole {before:.3f} s, cut {after:.4f} s ({before / after:.0f}x), same tokens: {same}", flush=True)
    load = os.getloadavg()[0]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "long_text_tokenize.json").write_text(json.dumps(
        {"megabytes": args.megabytes, "runs": args.runs, "load_1min": load, "rows": rows}, indent=1) + "\n")
    lines = [f"# A {args.megabytes:g} MB text through the tokenizer step (sequence_length 512)", "",
             f"Medians of {args.runs} runs, this machine (load {load:.1f}); `benchmarks/long_text_tokenize.py`.", "",
             "| tokenizer | tokenized whole (before) | cut before tokenizing (after) | ratio | same tokens |",
             "|---|---:|---:|---:|---|"]
    lines += [f"| {r['tokenizer']} | {r['whole_s']:.3f} s | {r['cut_s']:.4f} s | {r['speed_up']:g}x | "
              f"{r['same_tokens']} |" for r in rows]
    (args.out / "long_text_tokenize.md").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
