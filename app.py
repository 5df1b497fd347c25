#!/usr/bin/env python3
"""This checkout's CDK app (cdk.json: ``python app.py``): the spec app of ``stacks/spec_app.py`` for the specs of
this repository, which is the app's folder whatever the current directory. A user of the wheel runs the same app as
``python -m triton_sagemaker_stacks``. Importing ``stacks`` points jsii at the pinned Node before aws_cdk loads."""
from __future__ import annotations

import pathlib
import sys
from typing import TYPE_CHECKING, Any

from stacks import spec_app
from stacks.spec_app import stage_id  # noqa: F401  (the tests' entry points: build_app, cdk_json_context, main, stage_id)

if TYPE_CHECKING:
    import aws_cdk as cdk

ROOT = pathlib.Path(__file__).resolve().parent


def cdk_json_context() -> dict[str, Any]:
    return spec_app.cdk_json_context(ROOT)


def build_app(*args: Any, **kwargs: Any) -> "cdk.App":
    return spec_app.build_app(*args, root=ROOT, **kwargs)


def main() -> int:
    return spec_app.main(ROOT)


if __name__ == "__main__":
    sys.exit(main())
