"""The checkpoints the example specs name, made on this machine: tiny models with random weights and real
tokenizers and processors, so that every example builds and synthesizes from a fresh clone. Yours go in their
place (same folders, `save_pretrained` of your model and its tokenizer or processor).

    .venv/bin/python examples/make_checkpoints.py [--out examples/checkpoints]

Writes sst2 and sst2-retrained (BERT text classifiers, same labels, different weights:
bert-classifier-candidate.yaml), vit-photos (a ViT image classifier: image-async-sme.yaml) and t5-small (a T5:
t5-streaming-sme.yaml). A folder that exists is left as it is.
"""
from __future__ import annotations

import argparse
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _retrained(folder: pathlib.Path) -> None:
    """The same checkpoint with other weights: a candidate with the incumbent's task and labels."""
    import torch
    import transformers

    model = transformers.AutoModelForSequenceClassification.from_pretrained(folder)
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(0.05 * torch.randn(parameter.shape, generator=generator))
    model.save_pretrained(folder)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=pathlib.Path, default=ROOT / "examples" / "checkpoints")
    args = parser.parse_args()
    from benchmarks.tooling import generation_checkpoints, image_checkpoints, text_checkpoints

    makers = {
        "sst2": lambda f: text_checkpoints.save(f, "text-classification", "bert"),
        "sst2-retrained": lambda f: (text_checkpoints.save(f, "text-classification", "bert"), _retrained(f)),
        "vit-photos": lambda f: image_checkpoints.save(f, "vit"),
        "t5-small": lambda f: generation_checkpoints.save(f, "t5"),
    }
    for name, make in makers.items():
        folder = args.out / name
        if folder.exists():
            print(f"{folder}: exists, left as it is")
            continue
        make(folder)
        print(f"{folder}: written (random weights)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
