"""`tritonsm prices refresh` against botocore's Stubber: GetProducts answers shaped by the pricing service model
(PriceList: a list of JSON strings, one price-list product each), paginated, filtered to real-time hosting.

The product items follow the structure AWS documents for the Price List Query API (product.attributes with
usagetype, instanceName and regionCode; terms.OnDemand.<offer>.priceDimensions.<rate>.pricePerUnit.USD). Their
prices are test figures, not SageMaker prices.
"""
from __future__ import annotations

import datetime
import json
import socket

import boto3
import botocore.session
import pytest
from botocore.stub import Stubber

from deployment_spec.cost import pricing
from tritonsm.commands import prices as prices_cli
from tritonsm.cli import main

OPERATION = botocore.session.get_session().get_service_model("pricing").operation_model("GetProducts")


def _item(region: str, usagetype: str, instance_name: str, usd: str) -> dict:
    sku = f"SKU{abs(hash((region, usagetype))) % 10**8:08d}"
    return {
        "product": {"productFamily": "ML Instance", "sku": sku,
                    "attributes": {"regionCode": region, "servicecode": "AmazonSageMaker", "usagetype": usagetype,
                                   "instanceName": instance_name, "operation": "RunInstance",
                                   "location": "US East (N. Virginia)", "locationType": "AWS Region",
                                   "servicename": "Amazon SageMaker"}},
        "serviceCode": "AmazonSageMaker",
        "terms": {"OnDemand": {f"{sku}.JRTCKXETXF": {
            "offerTermCode": "JRTCKXETXF", "sku": sku, "effectiveDate": "2026-11-01T00:00:00Z", "termAttributes": {},
            "priceDimensions": {f"{sku}.JRTCKXETXF.6YS6EN2CT7": {
                "rateCode": f"{sku}.JRTCKXETXF.6YS6EN2CT7", "unit": "Hrs", "beginRange": "0", "endRange": "Inf",
                "appliesTo": [], "description": f"test figure for {usagetype}", "pricePerUnit": {"USD": usd}}}}}},
        "version": "20261101000000", "publicationDate": "2026-11-01T00:00:00Z",
    }


def _response(items: list[dict], next_token: str | None = None) -> dict:
    """A GetProducts response built member by member from the service model's output shape."""
    out: dict = {}
    for name, shape in OPERATION.output_shape.members.items():
        if name == "FormatVersion":
            assert shape.type_name == "string"
            out[name] = "aws_v1"
        elif name == "PriceList":
            # PriceListJsonItems: a list of strings, each a JSON document (the model marks them jsonvalue).
            assert shape.type_name == "list" and shape.member.type_name == "string"
            assert shape.member.serialization.get("jsonvalue") is True
            out[name] = [json.dumps(item) for item in items]
        elif name == "NextToken" and next_token is not None:
            out[name] = next_token
    return out


def _request(region: str, token: str | None = None) -> dict:
    params = {"ServiceCode": "AmazonSageMaker", "FormatVersion": "aws_v1",
              "Filters": [{"Type": "TERM_MATCH", "Field": "regionCode", "Value": region},
                          {"Type": "CONTAINS", "Field": "usagetype", "Value": "Host:ml."}]}
    return params | ({"NextToken": token} if token else {})


@pytest.fixture
def client():
    made = boto3.client("pricing", region_name="us-east-1", aws_access_key_id="testing",
                        aws_secret_access_key="testing")
    with Stubber(made) as stubber:
        stubber.add_response("get_products", _response(
            [_item("us-east-1", "USE1-Host:ml.g5.xlarge", "ml.g5.xlarge", "1.5000000000"),
             _item("us-east-1", "USE1-Train:ml.g5.xlarge", "ml.g5.xlarge", "9.0000000000")], next_token="page-2"),
            _request("us-east-1"))
        stubber.add_response("get_products", _response(
            [_item("us-east-1", "USE1-Host:ml.m5.large", "ml.m5.large", "0.2500000000")]),
            _request("us-east-1", "page-2"))
        yield made
        stubber.assert_no_pending_responses()


def test_refresh_reads_every_page_and_keeps_real_time_hosting_only(client):
    assert prices_cli.fetch_prices(client, "us-east-1") == {"ml.g5.xlarge": 1.5, "ml.m5.large": 0.25}


def test_prices_refresh_writes_a_dated_cache_read_before_the_snapshot(client, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(boto3, "client", lambda *a, **kw: client)
    out = tmp_path / "prices"
    assert main(["prices", "refresh", "--region", "us-east-1", "--output-dir", str(out)]) == 0
    written = out / f"sagemaker_realtime-{datetime.date.today().isoformat()}.json"
    assert capsys.readouterr().out == f"wrote {written} (instance types priced: us-east-1 2)\n"
    table = pricing.load_prices(cache_dir=out)
    price = table.lookup("us-east-1", "ml.g5.xlarge")
    assert price is not None and price.usd_per_hour == 1.5 and price.date == datetime.date.today().isoformat()
    assert price.source.startswith("AWS Price List Query API")
    assert table.files[-1].path == pricing.SNAPSHOT


def test_an_item_of_another_region_or_without_an_hourly_price_is_skipped():
    assert prices_cli.hosting_price(_item("eu-west-1", "EU-Host:ml.g5.xlarge", "ml.g5.xlarge", "1.0"), "us-east-1") \
        is None
    item = _item("us-east-1", "USE1-Host:ml.g5.xlarge", "ml.g5.xlarge", "1.0")
    for term in item["terms"]["OnDemand"].values():
        for dimension in term["priceDimensions"].values():
            dimension["unit"] = "GB-Mo"
    assert prices_cli.hosting_price(item, "us-east-1") is None


@pytest.fixture
def no_credentials(tmp_path, monkeypatch):
    """An environment where botocore finds no credentials anywhere: no variables, empty files, no instance
    metadata, no container or web-identity provider."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN",
                 "AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                 "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN"):
        monkeypatch.delenv(name, raising=False)
    for name in ("AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE"):
        empty = tmp_path / name.lower()
        empty.write_text("")
        monkeypatch.setenv(name, str(empty))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    # boto3.client uses boto3's module-wide default session, which keeps the credentials it found first: a test of
    # the same worker that called AWS with keys before would leave them there.
    monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)


def _snapshot_line(folder) -> str:
    return (f"go on without a refresh: the cost figures read the newest earlier refresh in {folder}, else the "
            "snapshot committed with the package (deployment_spec/cost/prices/sagemaker_realtime.json, of "
            f"{pricing.read_price_file(pricing.SNAPSHOT).date})")


def test_refresh_without_credentials_says_what_is_missing_without_a_traceback(no_credentials, tmp_path, capsys):
    out = tmp_path / "prices"
    assert main(["prices", "refresh", "--region", "us-east-1", "--output-dir", str(out)]) == 2
    captured = capsys.readouterr()
    assert captured.err == (
        "error: tritonsm prices refresh: no AWS credentials found (Unable to locate credentials); the AWS Price List "
        "Query API (pricing:GetProducts) answers signed requests only; fix: configure credentials allowed "
        "pricing:GetProducts (aws configure, aws sso login, AWS_PROFILE, or AWS_ACCESS_KEY_ID and "
        f"AWS_SECRET_ACCESS_KEY) and rerun, or {_snapshot_line(out)}\n")
    assert captured.out == "" and not out.exists()


def test_refresh_refused_by_the_api_names_the_permission(tmp_path, monkeypatch, capsys):
    made = boto3.client("pricing", region_name="us-east-1", aws_access_key_id="testing",
                        aws_secret_access_key="testing")
    monkeypatch.setattr(boto3, "client", lambda *a, **kw: made)
    out = tmp_path / "prices"
    with Stubber(made) as stubber:
        stubber.add_client_error("get_products", "AccessDeniedException", "not authorized to perform "
                                 "pricing:GetProducts", 400, expected_params=_request("us-east-1"))
        assert main(["prices", "refresh", "--region", "us-east-1", "--output-dir", str(out)]) == 2
    assert capsys.readouterr().err == (
        "error: tritonsm prices refresh: the AWS Price List Query API refused the request (An error occurred "
        "(AccessDeniedException) when calling the GetProducts operation: not authorized to perform "
        "pricing:GetProducts); fix: use credentials allowed pricing:GetProducts and rerun, or "
        f"{_snapshot_line(out)}\n")


def test_refresh_that_cannot_reach_the_api_says_so(tmp_path, monkeypatch, capsys):
    # A real client against a local port nothing listens on: botocore's own EndpointConnectionError, one attempt.
    from botocore.config import Config

    with socket.socket() as probe:  # a port that was free a moment ago: connections to it are refused
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    made = boto3.client("pricing", region_name="us-east-1", aws_access_key_id="testing",
                        aws_secret_access_key="testing", endpoint_url=f"http://127.0.0.1:{port}",
                        config=Config(retries={"total_max_attempts": 1}))
    monkeypatch.setattr(boto3, "client", lambda *a, **kw: made)
    out = tmp_path / "prices"
    assert main(["prices", "refresh", "--region", "us-east-1", "--output-dir", str(out)]) == 2
    assert capsys.readouterr().err == (
        "error: tritonsm prices refresh: the AWS Price List Query API (us-east-1) could not be called (Could not "
        f'connect to the endpoint URL: "http://127.0.0.1:{port}/"); fix: check the network and the AWS '
        f"configuration and rerun, or {_snapshot_line(out)}\n")
