"""Fixtures of the bench tests: a tiny spec with one vision and one BERT-like model."""
import pathlib

import pytest

from deployment_spec import load_spec

TINY_SPEC = pathlib.Path(__file__).with_name("tiny_bench.yaml")


@pytest.fixture(scope="session")
def tiny_spec():
    return load_spec(TINY_SPEC)
