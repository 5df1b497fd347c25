"""The documentation's two pictures, drawn with matplotlib as SVG (text kept as text, so the site's search and a
test can read it): the data flow from spec to endpoint, and one stage's resources as a synthesized assembly holds
them.

    .venv/bin/python scripts/draw_docs_figures.py [--assembly cdk.out] [--out docs/_static]

The stage picture is read from a cloud assembly (`make` writes cdk.out/): the default spec's prod stage, one box per
stack, each CloudFormation resource type with its count. tests/docs/test_docs_figures.py draws it again from the
test suite's own synthesized assembly and compares the labels.
"""
from __future__ import annotations

import argparse
import collections
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
STAGE = "TritonProd"
FLOW = [  # (box, what it is), left to right; the local endpoint hangs under the tarballs
    ("triton.yaml", "the spec: models,\nendpoints, environments"),
    ("tritonsm build", "export, convert, verify\nin the serving runtime"),
    ("assets/", "*.tar.gz model repositories\n+ manifest.json"),
    ("cdk synth", "app.py, stacks/,\ntriton_constructs; cdk-nag"),
    ("cdk deploy", "one stage per\nenvironment"),
    ("SageMaker endpoint", "Triton container,\nautoscaling, alarms"),
]


def _style(plt) -> None:
    plt.rcParams.update({"svg.fonttype": "none", "svg.hashsalt": "tritonsm", "font.family": "DejaVu Sans",
                         "font.size": 9})


def draw_flow(path: pathlib.Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    _style(plt)
    step, width = 2.3, 2.05
    fig, ax = plt.subplots(figsize=(13.5, 3.4))
    ax.set_xlim(0, len(FLOW) * step)
    ax.set_ylim(0, 3.4)
    ax.axis("off")
    for i, (title, text) in enumerate(FLOW):
        x = i * step + 0.1
        ax.add_patch(plt.Rectangle((x, 1.9), width, 1.2, facecolor="#e8f0fe", edgecolor="#1a73e8"))
        ax.text(x + width / 2, 2.8, title, ha="center", va="center", weight="bold")
        ax.text(x + width / 2, 2.3, text, ha="center", va="center", fontsize=7.5)
        if i:
            ax.annotate("", xy=(x, 2.5), xytext=(x - (step - width), 2.5), arrowprops={"arrowstyle": "->"})
    left = 2 * step + 0.1   # under the tarballs
    ax.add_patch(plt.Rectangle((left, 0.2), 2 * width, 1.0, facecolor="#fef7e0", edgecolor="#f9ab00"))
    ax.text(left + width, 0.9, "tritonsm serve", ha="center", va="center", weight="bold")
    ax.text(left + width, 0.5, "the real Triton server on the same tarballs,\nanswering boto3 as SageMaker does",
            ha="center", va="center", fontsize=7.5)
    ax.annotate("", xy=(left + width / 2, 1.2), xytext=(left + width / 2, 1.9), arrowprops={"arrowstyle": "->"})
    fig.savefig(path, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)


def stage_resources(assembly: pathlib.Path, stage: str = STAGE) -> dict[str, collections.Counter]:
    """Stack (display name) -> CloudFormation resource type -> count, for every stack of ``stage``."""
    nested = assembly / f"assembly-{stage}"
    manifest = json.loads((nested / "manifest.json").read_text())
    out: dict[str, collections.Counter] = {}
    for artifact in manifest["artifacts"].values():
        template = artifact.get("properties", {}).get("templateFile")
        if artifact.get("type") != "aws:cloudformation:stack" or not template:
            continue
        resources = json.loads((nested / template).read_text()).get("Resources", {})
        # AWS::CDK::Metadata is the CLI's version reporting (absent when an app is synthesized without the CLI).
        out[artifact["displayName"].split("/", 1)[1]] = collections.Counter(
            r["Type"] for r in resources.values() if r["Type"] != "AWS::CDK::Metadata")
    return dict(sorted(out.items()))


def draw_stage(path: pathlib.Path, stacks: dict[str, collections.Counter]) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    _style(plt)
    tallest = max(len(c) for c in stacks.values())
    fig, ax = plt.subplots(figsize=(4.2 * len(stacks), 0.32 * tallest + 1.2))
    ax.set_xlim(0, len(stacks) * 4.2)
    ax.set_ylim(0, tallest + 1.5)
    ax.axis("off")
    for i, (stack, counts) in enumerate(stacks.items()):
        x = i * 4.2 + 0.1
        ax.add_patch(plt.Rectangle((x, 0.2), 4.0, tallest + 1.1, facecolor="#f1f3f4", edgecolor="#5f6368"))
        ax.text(x + 0.15, tallest + 0.9, f"{STAGE}/{stack}", weight="bold")
        for row, (kind, n) in enumerate(sorted(counts.items())):
            ax.text(x + 0.15, tallest + 0.3 - row, f"{n} × {kind}", fontsize=8)
    fig.savefig(path, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--assembly", type=pathlib.Path, default=ROOT / "cdk.out")
    parser.add_argument("--out", type=pathlib.Path, default=ROOT / "docs" / "_static")
    args = parser.parse_args()
    if not (args.assembly / f"assembly-{STAGE}").is_dir():
        print(f"error: {args.assembly} holds no assembly-{STAGE}; run `make` (it synthesizes cdk.out/) or give "
              "--assembly", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    draw_flow(args.out / "data-flow.svg")
    draw_stage(args.out / "stage-resources.svg", stage_resources(args.assembly))
    print(f"wrote {args.out / 'data-flow.svg'} and {args.out / 'stage-resources.svg'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
