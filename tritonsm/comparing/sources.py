"""Where the captures are: a local folder (`tritonsm serve`'s, or a copy of the bucket) or the S3 location itself.

Both hold SageMaker Data Capture's layout, ``<root>/<endpoint>/<variant>/yyyy/mm/dd/hh/<file>.jsonl`` (developer
guide, "Capture data from real-time endpoint"). Only the window's hour folders are read.
"""
from __future__ import annotations

import pathlib
from typing import Any, Iterator, Optional, Protocol

from deployment_spec.parsing.errors import UserError

from tritonsm.comparing.records import Record, parse_record
from tritonsm.comparing.window import Window

S3_SCHEME = "s3://"


class Source(Protocol):
    label: str  # how messages name it: the folder or the s3:// URL

    def variants(self, endpoint: str) -> list[str]: ...

    def lines(self, endpoint: str, variant: str, hour: str) -> Iterator[tuple[str, str]]:
        """(where, line) of every line of the variant's files in one hour folder, files in name order."""
        ...


def open_source(captures: str, s3: Any = None) -> Source:
    if captures.startswith(S3_SCHEME):
        bucket, _, prefix = captures[len(S3_SCHEME):].partition("/")
        if not bucket:
            raise UserError(f"--captures {captures}: no bucket; give s3://BUCKET/PREFIX/ (the DestinationS3Uri of "
                            "the endpoint's data capture) or a local folder")
        return S3Source(captures, bucket, prefix.strip("/"), s3)
    root = pathlib.Path(captures)
    if not root.is_dir():
        raise UserError(f"--captures {captures}: no such folder; give the data-capture root (it holds "
                        "<endpoint>/<variant>/yyyy/mm/dd/hh/*.jsonl) or s3://BUCKET/PREFIX/")
    return LocalSource(root)


def read_variant(source: Source, endpoint: str, variant: str, window: Window) -> list[Record]:
    """The variant's records whose inferenceTime is in the window, oldest first."""
    out = []
    for hour in window.hour_folders():
        for where, line in source.lines(endpoint, variant, hour):
            if line.strip():
                record = parse_record(line, where)
                if window.holds(record.time):
                    out.append(record)
    return sorted(out, key=lambda r: r.time)


class LocalSource:
    def __init__(self, root: pathlib.Path) -> None:
        self.root = root
        self.label = str(root)

    def variants(self, endpoint: str) -> list[str]:
        folder = self.root / endpoint
        if not folder.is_dir():
            found = sorted(p.name for p in self.root.iterdir() if p.is_dir())
            raise UserError(f"--endpoint {endpoint}: no folder {folder}; endpoints captured under {self.root}: "
                            f"{', '.join(found) or 'none'} (give the endpoint's name as its data capture files it)")
        return sorted(p.name for p in folder.iterdir() if p.is_dir())

    def lines(self, endpoint: str, variant: str, hour: str) -> Iterator[tuple[str, str]]:
        for path in sorted((self.root / endpoint / variant / hour).glob("*.jsonl")):
            try:
                text = path.read_text()
            except (OSError, UnicodeDecodeError) as error:
                raise UserError(f"{path}: cannot read this capture file ({error}); fix its permissions or remove "
                                "it") from None
            for number, line in enumerate(text.splitlines(), 1):
                yield f"{path}:{number}", line


class S3Source:
    def __init__(self, label: str, bucket: str, prefix: str, client: Any = None) -> None:
        self.label, self.bucket, self.prefix = label, bucket, prefix
        self._client = client

    def _s3(self) -> Any:
        if self._client is None:
            import boto3
            self._client = boto3.client("s3")
        return self._client

    def _key(self, *parts: str) -> str:
        return "/".join(p for p in (self.prefix, *parts) if p) + "/"

    def variants(self, endpoint: str) -> list[str]:
        key = self._key(endpoint)
        found = [p["Prefix"][len(key):].rstrip("/") for page in self._pages(key, delimiter=True)
                 for p in page.get("CommonPrefixes", [])]
        if not found:
            raise UserError(f"--endpoint {endpoint}: nothing under s3://{self.bucket}/{key}; give the endpoint's "
                            f"name as its data capture files it, and check --captures (the DestinationS3Uri of "
                            "its data capture)")
        return sorted(found)

    def lines(self, endpoint: str, variant: str, hour: str) -> Iterator[tuple[str, str]]:
        keys = sorted(o["Key"] for page in self._pages(self._key(endpoint, variant, hour))
                      for o in page.get("Contents", []) if o["Key"].endswith(".jsonl"))
        for key in keys:
            text = self._call(key, lambda: self._s3().get_object(Bucket=self.bucket, Key=key)["Body"].read()
                              ).decode(errors="replace")
            for number, line in enumerate(text.splitlines(), 1):
                yield f"s3://{self.bucket}/{key}:{number}", line

    def _pages(self, key: str, delimiter: bool = False) -> Iterator[dict[str, Any]]:
        # list_objects_v2 returns at most 1,000 keys a call: the paginator follows ContinuationToken.
        options = {"Bucket": self.bucket, "Prefix": key, **({"Delimiter": "/"} if delimiter else {})}
        pages = self._s3().get_paginator("list_objects_v2").paginate(**options)
        iterator = iter(pages)
        while True:
            page: Optional[dict[str, Any]] = self._call(key, lambda: next(iterator, None))
            if page is None:
                return
            yield page

    def _call(self, key: str, call: Any) -> Any:
        from botocore.exceptions import BotoCoreError, ClientError
        try:
            return call()
        except (BotoCoreError, ClientError) as error:
            raise UserError(f"--captures {self.label}: cannot read s3://{self.bucket}/{key} ({error}); check the "
                            "bucket and prefix (the DestinationS3Uri of the endpoint's data capture) and that your "
                            "credentials allow s3:ListBucket and s3:GetObject there") from None
