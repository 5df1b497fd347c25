"""Step lines in the build log: one when a long step starts, one with its duration when it ends."""
from __future__ import annotations

import time


class Step:
    """One line when a long step starts and one with its duration when it ends."""

    def __init__(self, ctx, name: str, what: str) -> None:
        self.ctx, self.name, self.what, self.start = ctx, name, what, time.monotonic()
        ctx.steps[name] = what
        ctx.log(f"  {name}: {what} ...")

    def done(self, extra: str = "") -> None:
        self.ctx.log(f"  {self.name}: {self.what} done in {time.monotonic() - self.start:.1f} s{extra}")
