"""Triton image URIs per region and version, from the vendored SDK registry table."""
from __future__ import annotations

from deployment_spec.facts import triton_images


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
