"""The flags several ``tritonsm`` commands share, each defined once.

argparse only: importing local_endpoint (or numpy) here would load it for every command's ``--help``.
"""
from __future__ import annotations

import argparse
import pathlib

from deployment_spec.builds.manifest import DEFAULT_MANIFEST

# Spelled out here, not imported from local_endpoint.image.images, to keep numpy out of every command.
SAGEMAKER, IMAGE_KINDS = "sagemaker", ("sagemaker", "ngc")


def add_spec_endpoint_flags(parser: argparse.ArgumentParser, *, when: str = "",
                            environment_help: str = "whose overrides apply (default: the spec's first environment)",
                            ) -> None:
    """``--environment`` and ``--manifest``: which environment's view of a spec endpoint, from which build.

    ``when`` prefixes each help text where the flags apply only with another one (``"with --endpoint: "``).
    """
    parser.add_argument("--environment", help=when + environment_help)
    parser.add_argument("--manifest", type=pathlib.Path, default=DEFAULT_MANIFEST,
                        help=f"{when}the build manifest (default: {DEFAULT_MANIFEST})")


def add_request_flags(parser: argparse.ArgumentParser, *, when: str = "") -> None:
    """What a measuring command sends a spec endpoint it serves itself: the served models, the request inputs,
    the payload encoding, and the capacity file its result is recorded in (``tritonsm bench load`` and ``drain``)."""
    add_spec_endpoint_flags(parser, when=when)
    parser.add_argument("--cpu-stand-in", action="store_true",
                        help=f"{when}serve ONNX Runtime / TorchScript models as labelled CPU stand-ins")
    parser.add_argument("--json", action="store_true", help="send JSON payloads instead of binary+json")
    parser.add_argument("--input", type=pathlib.Path,
                        help=f"{when}request inputs (.json or .npz); text models get a sample sentence, image models "
                             "a sample JPEG by default")
    # Not --image: on serve and smoke that names the Docker image an endpoint runs in.
    parser.add_argument("--image-file", type=pathlib.Path, nargs="+", metavar="FILE",
                        help=f"{when}image files each request sends as one batch of encoded bytes to a model that "
                             "decodes them (dali, or an ensemble starting with it); default: a 640x480 sample JPEG")
    parser.add_argument("--capacity", type=pathlib.Path, default=None,
                        help="capacity file (default: capacity.json)")


def add_image_flags(parser: argparse.ArgumentParser, help_: str, *, region: bool = True) -> None:
    """``--image [sagemaker|ngc]`` (and ``--region``): run an endpoint in its own image with Docker."""
    parser.add_argument("--image", nargs="?", const=SAGEMAKER, choices=IMAGE_KINDS, help=help_)
    if region:
        parser.add_argument("--region", help="with --image sagemaker: the registry's region (default: your AWS "
                                             "configuration's, else the environment's)")
