"""On-demand hourly prices of SageMaker real-time inference instances, per region and instance type.

Two sources, looked up in this order, each figure keeping where it came from and when:

1. The newest refresh cache, ``build/prices/sagemaker_realtime-<YYYY-MM-DD>.json`` under the spec's folder, written
   by ``tritonsm prices refresh`` from the AWS Price List Query API (boto3 ``pricing`` client, ``GetProducts``,
   service code ``AmazonSageMaker``; ``tritonsm/prices.py``).
2. The snapshot shipped with the package, ``deployment_spec/cost/prices/sagemaker_realtime.json``, for offline use. It
   names its source and date; a figure it lacks is never guessed: the cost shows as unknown, saying which type and
   region and how to refresh (``missing``).

Both files have one shape::

    {"schema": 1, "source": "...", "date": "YYYY-MM-DD", "currency": "USD", "unit": "per instance-hour",
     "regions": ["us-east-1", ...],
     "prices": {"us-east-1": {"ml.g5.xlarge": 1.234 | {"usd_per_hour": 1.234, "source": "...", "date": "..."}}}}

A bare number takes the file's source and date; an object names its own (a figure cited from another page).

Pure: no boto3, no aws_cdk (the spec loader reads it for ``budget:``).
"""
from __future__ import annotations

import dataclasses
import datetime
import json
import pathlib
import re
from typing import Any, Iterable, Mapping, Optional

SCHEMA_VERSION = 1
SNAPSHOT = pathlib.Path(__file__).parent / "prices" / "sagemaker_realtime.json"
CACHE_DIR = pathlib.Path("build") / "prices"  # relative to the spec's folder
CACHE_PREFIX = "sagemaker_realtime-"
_CACHE_NAME = re.compile(re.escape(CACHE_PREFIX) + r"(\d{4}-\d{2}-\d{2})\.json")
REFRESH_HINT = "tritonsm prices refresh --region {region} --instance-type {instance_type}"


class PricesError(ValueError):
    """A price file that cannot be read (malformed JSON, another schema)."""


@dataclasses.dataclass(frozen=True)
class Price:
    """One on-demand hourly price, with where it came from and its date."""

    usd_per_hour: float
    region: str
    instance_type: str
    source: str
    date: str  # YYYY-MM-DD: when the figure was read


@dataclasses.dataclass(frozen=True)
class PriceFile:
    path: pathlib.Path
    source: str
    date: str
    prices: Mapping[str, Mapping[str, Price]]  # region -> instance type -> price

    @property
    def label(self) -> str:
        return f"{self.path.name} of {self.date}"


def read_price_file(path: pathlib.Path) -> PriceFile:
    try:
        raw = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PricesError(f"{path}: unreadable price file ({exc}); rerun `tritonsm prices refresh` or delete "
                          "it") from None
    if not isinstance(raw, dict) or raw.get("schema") != SCHEMA_VERSION or not isinstance(raw.get("prices"), dict):
        raise PricesError(f"{path}: not a price file of schema {SCHEMA_VERSION} (a JSON object with schema, source, "
                          "date and prices); rerun `tritonsm prices refresh` or delete it")
    source, date = str(raw.get("source", path.name)), str(raw.get("date", ""))
    prices: dict[str, dict[str, Price]] = {}
    for region, types in raw["prices"].items():
        if not isinstance(types, dict):
            raise PricesError(f"{path}: prices.{region}: a mapping of instance type: price is expected")
        for instance_type, value in types.items():
            if isinstance(value, dict):
                figure, own_source, own_date = value.get("usd_per_hour"), value.get("source", source), \
                    value.get("date", date)
            else:
                figure, own_source, own_date = value, source, date
            if isinstance(figure, bool) or not isinstance(figure, (int, float)) or figure < 0:
                raise PricesError(f"{path}: prices.{region}.{instance_type}: got {figure!r}; a price in USD per "
                                  "instance-hour (a number >= 0) is expected")
            prices.setdefault(region, {})[instance_type] = Price(float(figure), region, instance_type,
                                                                 str(own_source), str(own_date))
    return PriceFile(path, source, date, prices)


def newest_cache(folder: pathlib.Path) -> pathlib.Path | None:
    """The newest ``sagemaker_realtime-<date>.json`` in ``folder`` (by the date in its name), or None."""
    if not folder.is_dir():
        return None
    dated = [(m.group(1), p) for p in folder.iterdir() if (m := _CACHE_NAME.fullmatch(p.name))]
    return max(dated)[1] if dated else None


def cache_path(folder: pathlib.Path, day: datetime.date) -> pathlib.Path:
    return folder / f"{CACHE_PREFIX}{day.isoformat()}.json"


@dataclasses.dataclass(frozen=True)
class PriceTable:
    """The price files in lookup order (the refresh cache first, then the shipped snapshot)."""

    files: tuple[PriceFile, ...]

    def lookup(self, region: Optional[str], instance_type: str) -> Price | None:
        if not region:
            return None
        for price_file in self.files:
            found = price_file.prices.get(region, {}).get(instance_type)
            if found is not None:
                return found
        return None

    def missing(self, region: Optional[str], instance_type: str) -> str:
        """Why a type has no price, and how to get one: the message an unknown price shows."""
        if not region:
            return (f"unknown price: {instance_type} in an environment without region (prices are per region); set "
                    "the environment's region")
        looked = ", ".join(f.label for f in self.files) or "no price file"
        return (f"unknown price: {instance_type} in {region} is in none of {looked}; with AWS credentials "
                f"(pricing:GetProducts) run `{REFRESH_HINT.format(region=region, instance_type=instance_type)}`")

    def covered(self) -> dict[str, set[str]]:
        """Region -> the instance types some file prices there."""
        out: dict[str, set[str]] = {}
        for price_file in self.files:
            for region, types in price_file.prices.items():
                out.setdefault(region, set()).update(types)
        return out


def load_prices(root: pathlib.Path | None = None, *, snapshot: pathlib.Path = SNAPSHOT,
                cache_dir: pathlib.Path | None = None) -> PriceTable:
    """The refresh cache under ``root`` (the spec's folder; ``build/prices``), then the shipped snapshot."""
    files = []
    folder = cache_dir if cache_dir is not None else (root / CACHE_DIR if root is not None else None)
    newest = newest_cache(folder) if folder is not None else None
    if newest is not None:
        files.append(read_price_file(newest))
    files.append(read_price_file(snapshot))
    return PriceTable(tuple(files))


def price_document(source: str, day: datetime.date, prices: Mapping[str, Mapping[str, float]],
                   regions: Iterable[str], extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A price file's JSON object (what ``tritonsm prices refresh`` writes)."""
    return {"schema": SCHEMA_VERSION, "source": source, "date": day.isoformat(), "currency": "USD",
            "unit": "per instance-hour", "kind": "SageMaker real-time inference (hosting), on-demand",
            "regions": sorted(set(regions)), **(extra or {}),
            "prices": {region: dict(sorted(types.items())) for region, types in sorted(prices.items())}}
