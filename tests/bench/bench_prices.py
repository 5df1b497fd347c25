"""Test price figures for the cost-per-million tests: round on purpose, not AWS prices.

ml.g5.xlarge at $2/h in us-east-1, ml.g6.xlarge at $3.60/h in us-west-2, nothing in eu-west-1 (an unknown price),
written as a refresh cache beside a copy of the tiny spec (deployment_spec.cost.pricing reads it before the shipped
snapshot).
"""
from __future__ import annotations

import datetime
import json
import pathlib

from deployment_spec.cost import pricing

TINY_SPEC = pathlib.Path(__file__).with_name("tiny_bench.yaml")
TEST_PRICE_SOURCE = "TEST FIGURES for tests/bench, not AWS prices"
TEST_PRICE_DATE = "2026-11-01"
TEST_PRICES = {"us-east-1": {"ml.g5.xlarge": 2.0}, "us-west-2": {"ml.g6.xlarge": 3.6}}
# The tiny spec's dev (us-east-1), and two more: tiny-sme served on another type in us-west-2, and an unpriced region.
ENVIRONMENTS = """\
  staging:
    region: us-west-2
    overrides:
      endpoints:
        tiny-sme: {instance_type: ml.g6.xlarge}
  eu:
    region: eu-west-1
"""


def write_priced_spec(folder: pathlib.Path) -> pathlib.Path:
    """The spec file, with build/prices/sagemaker_realtime-<TEST_PRICE_DATE>.json of the test figures beside it."""
    prices = folder / "build" / "prices"
    prices.mkdir(parents=True)
    spec = folder / "triton.yaml"
    spec.write_text(TINY_SPEC.read_text() + ENVIRONMENTS)
    (prices / f"sagemaker_realtime-{TEST_PRICE_DATE}.json").write_text(json.dumps(pricing.price_document(
        TEST_PRICE_SOURCE, datetime.date.fromisoformat(TEST_PRICE_DATE), TEST_PRICES, TEST_PRICES)))
    return spec
