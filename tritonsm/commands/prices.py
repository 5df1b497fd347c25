"""`tritonsm prices refresh`: SageMaker real-time inference prices from the AWS Price List Query API into a dated
cache (deployment_spec.cost.pricing reads it). Needs boto3 and AWS credentials (pricing:GetProducts).
"""
from __future__ import annotations

import argparse
import datetime
import json
import pathlib
import re
from typing import Any, Callable, Iterable, Mapping


from deployment_spec import load_spec
from deployment_spec.cost.pricing import CACHE_DIR, SNAPSHOT, cache_path, price_document, read_price_file
from deployment_spec.parsing.errors import UserError

SERVICE_CODE = "AmazonSageMaker"
# The Price List Query API answers in these regions only (AWS Price List Query API: endpoints); the prices it
# returns are for any region, named by the regionCode filter.
PRICING_API_REGION = "us-east-1"
# Real-time inference hosting: usage types such as "USE1-Host:ml.g5.xlarge" (training is "Train:", notebooks
# "Notebk:", serverless and asynchronous inference have their own).
HOSTING_USAGE = re.compile(r"(?:^|-)Host:(ml\.[a-z0-9-]+\.[a-z0-9]+)$")
SNAPSHOT_REGIONS = ("us-east-1", "us-west-2", "eu-west-1")

def register(add: Callable[..., argparse.ArgumentParser]) -> None:
    r = add("prices", "refresh the SageMaker real-time inference prices from the AWS Price List Query API "
                      "(boto3 pricing GetProducts, AWS credentials needed) into build/prices/", cmd_prices)
    r.add_argument("action", choices=["refresh"], help="refresh: write build/prices/sagemaker_realtime-<date>.json")
    r.add_argument("--region", action="append", default=None, metavar="REGION",
                   help="a region to price (repeatable; default: the spec's environments' regions and "
                        f"{', '.join(SNAPSHOT_REGIONS)})")
    r.add_argument("--instance-type", action="append", default=None, metavar="TYPE",
                   help="only these instance types (repeatable; default: every real-time hosting type)")
    r.add_argument("--output-dir", type=pathlib.Path, default=None, metavar="DIR",
                   help=f"where the dated file goes (default: {CACHE_DIR} next to the spec)")


def cmd_prices(args: argparse.Namespace) -> int:
    regions = args.region or _default_regions(args.spec)
    import boto3  # the local / bench / dev extras bring it
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

    folder = args.output_dir or (pathlib.Path(args.spec).resolve().parent / CACHE_DIR)
    client = boto3.client("pricing", region_name=PRICING_API_REGION)
    # botocore finds (or misses) the credentials at the first call, not when the client is made.
    try:
        prices = {region: fetch_prices(client, region, args.instance_type) for region in regions}
    except NoCredentialsError as error:
        raise UserError(f"tritonsm prices refresh: no AWS credentials found ({error}); the AWS Price List Query API "
                        "(pricing:GetProducts) answers signed requests only; fix: configure credentials allowed "
                        "pricing:GetProducts (aws configure, aws sso login, AWS_PROFILE, or AWS_ACCESS_KEY_ID and "
                        f"AWS_SECRET_ACCESS_KEY) and rerun, or {_without_refresh(folder)}") from None
    except ClientError as error:
        raise UserError(f"tritonsm prices refresh: the AWS Price List Query API refused the request ({error}); fix: "
                        "use credentials allowed pricing:GetProducts and rerun, or "
                        f"{_without_refresh(folder)}") from None
    except BotoCoreError as error:
        raise UserError(f"tritonsm prices refresh: the AWS Price List Query API ({PRICING_API_REGION}) could not be "
                        f"called ({error}); fix: check the network and the AWS configuration and rerun, or "
                        f"{_without_refresh(folder)}") from None
    path = write_cache(prices, folder, datetime.date.today())
    counted = ", ".join(f"{region} {len(types)}" for region, types in prices.items())
    print(f"wrote {path} (instance types priced: {counted})")
    return 0


def _without_refresh(folder: pathlib.Path) -> str:
    """What the cost figures read when no refresh runs (deployment_spec.cost.pricing.load_prices)."""
    snapshot = read_price_file(SNAPSHOT)
    shipped = SNAPSHOT.relative_to(SNAPSHOT.parents[3]).as_posix()
    return (f"go on without a refresh: the cost figures read the newest earlier refresh in {folder}, else the "
            f"snapshot committed with the package ({shipped}, of {snapshot.date})")


def _default_regions(spec_path: str) -> list[str]:
    regions = list(SNAPSHOT_REGIONS)
    try:
        spec = load_spec(spec_path)
    except Exception:  # noqa: BLE001  a refresh needs no valid spec
        return regions
    return list(dict.fromkeys([*(e.region for e in spec.environments.values() if e.region), *regions]))


def _filters(region: str, instance_type: str | None) -> list[dict[str, str]]:
    out = [{"Type": "TERM_MATCH", "Field": "regionCode", "Value": region},
           {"Type": "CONTAINS", "Field": "usagetype", "Value": "Host:ml."}]
    if instance_type:
        out.append({"Type": "TERM_MATCH", "Field": "instanceName", "Value": instance_type})
    return out


def fetch_prices(client: Any, region: str, instance_types: Iterable[str] | None = None) -> dict[str, float]:
    """Instance type -> on-demand USD per hour of real-time inference hosting in ``region`` (every page)."""
    out: dict[str, float] = {}
    paginator = client.get_paginator("get_products")
    for instance_type in list(instance_types or []) or [None]:
        for page in paginator.paginate(ServiceCode=SERVICE_CODE, Filters=_filters(region, instance_type),
                                       FormatVersion="aws_v1"):
            for item in page.get("PriceList", []):
                found = hosting_price(json.loads(item) if isinstance(item, str) else item, region)
                if found is not None and (found[0] not in out or out[found[0]] == 0):
                    out[found[0]] = found[1]
    return dict(sorted(out.items()))


def hosting_price(product: Mapping[str, Any], region: str) -> tuple[str, float] | None:
    """(instance type, USD per hour) of one PriceList item when it is real-time hosting on demand in ``region``."""
    attributes = product.get("product", {}).get("attributes", {})
    match = HOSTING_USAGE.search(attributes.get("usagetype", ""))
    if match is None or attributes.get("regionCode", region) != region:
        return None
    instance_type = attributes.get("instanceName") or match.group(1)
    for term in product.get("terms", {}).get("OnDemand", {}).values():
        for dimension in term.get("priceDimensions", {}).values():
            usd = dimension.get("pricePerUnit", {}).get("USD")
            if usd is not None and dimension.get("unit", "").lower() in ("hrs", "hr", "hour", "hours"):
                return instance_type, float(usd)
    return None


def write_cache(prices: Mapping[str, Mapping[str, float]], folder: pathlib.Path, day: datetime.date) -> pathlib.Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = cache_path(folder, day)
    document = price_document(f"AWS Price List Query API (pricing GetProducts, {SERVICE_CODE}, usagetype *Host:ml.*)",
                              day, prices, prices.keys())
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(document, indent=2) + "\n")
    tmp.replace(path)
    return path
