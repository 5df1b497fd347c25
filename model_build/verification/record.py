"""The verification record of a model the build cannot run in its serving runtime, with the reason.

Kept in the manifest next to the records of the checks that ran, so a reader sees why one is missing.
"""
from __future__ import annotations

from typing import Any


def not_run(triton_version: str, why: str) -> dict[str, Any]:
    return {"ran": False, "triton_version": triton_version, "why": why}
