"""The manifest's verification record, typed: from a backend's measurements, or for a model not run.

Each backend measures in its own terms (verify.record's fields, the int8 gate, DALI's pixel
levels); the fields every record can have become ``Verification``'s own, the rest its ``details``.
A model the build cannot run in its serving runtime gets a record that says why, kept in the
manifest next to the records of the checks that ran, so a reader sees why one is missing.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from deployment_spec.builds.manifest import Verification

_OWN_FIELDS = {field.name for field in dataclasses.fields(Verification)} - {"details"}


def typed(record: Mapping[str, Any]) -> Verification:
    """A backend's record as the manifest keeps it: shared fields typed, the backend's own under ``details``."""
    own = {key: value for key, value in record.items() if key in _OWN_FIELDS}
    return Verification(**own, details={key: value for key, value in record.items() if key not in _OWN_FIELDS})


def not_run(triton_version: str, why: str) -> Verification:
    return Verification(ran=False, triton_version=triton_version, why=why)
