"""Triton image URIs per region and version, from the vendored SDK registry table."""
from __future__ import annotations

from deployment_spec import triton_images

# CUDA major version of each image (FACTS §6.3), which decides the inference AMI.
CUDA_MAJOR = {"23.12": 12, "24.01": 12, "24.03": 12, "24.05": 12, "24.09": 12, "25.04": 12,
              "25.09": 13, "26.05": 13}


def versions() -> list[str]:
    return sorted(triton_images.REGISTRIES)


def regions(version: str) -> list[str]:
    return sorted(triton_images.REGISTRIES.get(version, {}))


def account(version: str, region: str) -> str | None:
    return triton_images.REGISTRIES.get(version, {}).get(region)


def domain(region: str) -> str:
    return triton_images.ALTERNATE_DOMAINS.get(region, "amazonaws.com")


def image_uri(version: str, region: str) -> str:
    """The GPU image URI; raises KeyError when the SDK has no such image (callers validate first)."""
    acct = triton_images.REGISTRIES[version][region]
    return (f"{acct}.dkr.ecr.{region}.{domain(region)}/{triton_images.REPOSITORY}:"
            f"{triton_images.TAG_PREFIX[version]}")
