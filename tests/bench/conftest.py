"""Fixtures of the bench tests: a tiny spec with one vision and one BERT-like model."""
import pathlib

import sys

import pytest

from deployment_spec import load_spec

TINY_SPEC = pathlib.Path(__file__).with_name("tiny_bench.yaml")
# bench_prices (the test price figures) imports from here.
if str(TINY_SPEC.parent) not in sys.path:
    sys.path.insert(0, str(TINY_SPEC.parent))


@pytest.fixture(scope="session")
def tiny_spec():
    return load_spec(TINY_SPEC)



@pytest.fixture
def priced_spec(tmp_path):
    """The tiny spec, deployed in three regions, with a refresh cache of test figures beside it (bench_prices)."""
    from bench_prices import write_priced_spec

    return load_spec(write_priced_spec(tmp_path / "spec"))
