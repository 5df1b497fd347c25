"""The time window of `tritonsm compare`: ``--since``/``--until`` as ISO 8601 times or durations back from now.

Data Capture files its records under an hour folder, ``yyyy/mm/dd/hh`` in UTC (SageMaker developer guide, "Capture
data from real-time endpoint": ``s3://<bucket>/<prefix>/<endpoint>/<variant>/yyyy/mm/dd/hh/<file>.jsonl``), so the
window also says which folders to read: the hours it touches, no others.
"""
from __future__ import annotations

import dataclasses
import datetime as dt
import re

from deployment_spec.parsing.errors import UserError

DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhd])")
SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
DEFAULT_SINCE = "1h"


@dataclasses.dataclass(frozen=True)
class Window:
    since: dt.datetime  # UTC, inclusive
    until: dt.datetime  # UTC, inclusive

    def holds(self, moment: dt.datetime) -> bool:
        return self.since <= moment <= self.until

    def hour_folders(self) -> list[str]:
        """``yyyy/mm/dd/hh`` of every hour the window touches, oldest first."""
        hour = self.since.replace(minute=0, second=0, microsecond=0)
        out = []
        while hour <= self.until:
            out.append(hour.strftime("%Y/%m/%d/%H"))
            hour += dt.timedelta(hours=1)
        return out

    def describe(self) -> str:
        return f"{iso(self.since)} to {iso(self.until)}"


def iso(moment: dt.datetime) -> str:
    return moment.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_window(since: str | None, until: str | None, now: dt.datetime) -> Window:
    start = parse_time(since or DEFAULT_SINCE, "--since", now)
    end = parse_time(until, "--until", now) if until else now
    if start >= end:
        raise UserError(f"--since {since or DEFAULT_SINCE} ({iso(start)}) is not before --until "
                        f"{until or 'now'} ({iso(end)}); give an earlier --since or a later --until")
    return Window(start, end)


def parse_time(text: str, flag: str, now: dt.datetime) -> dt.datetime:
    """An ISO 8601 time (UTC where it names no zone) or a duration back from ``now`` (``90s``, ``30m``, ``2d``)."""
    duration = DURATION.fullmatch(text.strip())
    if duration:
        return now - dt.timedelta(seconds=float(duration.group(1)) * SECONDS[duration.group(2)])
    try:
        moment = parse_instant(text.strip())
    except ValueError:
        raise UserError(f"{flag} {text!r}: not a time; give an ISO 8601 time (e.g. 2026-11-28T05:00:00Z; one "
                        "without a zone is UTC) or a duration back from now (90s, 30m, 1h, 2d)") from None
    return moment


def parse_instant(text: str) -> dt.datetime:
    """An ISO 8601 time in UTC (Python 3.11's fromisoformat takes the ``Z`` that Data Capture writes)."""
    moment = dt.datetime.fromisoformat(text)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.timezone.utc)
    return moment.astimezone(dt.timezone.utc)
