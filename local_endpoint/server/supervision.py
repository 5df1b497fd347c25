"""Watching a served Triton server as SageMaker watches a container, and replacing it when it fails.

SageMaker pings each container (``GET /ping``) and replaces one that exits or stops answering; the endpoint, its
asynchronous queue and its S3 outputs outlive it, and real-time callers get a 5xx while it is down. `tritonsm serve`
does the same for each Triton server it runs: ``Supervisor.watch`` (called by the serve loop twice a second) finds
a server whose process has exited, or whose ``/ping`` has not answered 200 for ``unhealthy_after_s`` (Triton's
SageMaker front end answers /ping from the server's readiness; its HTTP front end, with /v2/health/ready, is off
as in the container), ends what is left of it and starts it again on the same port with the same models. Each
restart is told on stderr and in the server's log, with the reason and the dead server's last lines.

Restarts are bounded: a server that fails more than ``max_restarts`` times within ``window_s`` seconds (a model
that crashes on every start, a machine out of memory) ends `tritonsm serve` with a message naming the bound, so a
crash loop is seen instead of hidden behind late answers.
"""
from __future__ import annotations

import dataclasses
import sys
import time
from typing import Callable, Optional

from local_endpoint.errors import LocalEndpointError, PortInUseError, RestartLimitError, ServerStartError
from local_endpoint.server.server_process import TritonProcess, describe_exit, ping

DEFAULT_MAX_RESTARTS = 3
DEFAULT_WINDOW_S = 600.0
DEFAULT_UNHEALTHY_AFTER_S = 30.0
TRITON = "the Triton server"


@dataclasses.dataclass(frozen=True)
class RestartPolicy:
    """How often a served Triton server may be restarted, and when a live one counts as failed.

    Args:
        max_restarts: Restarts allowed within ``window_s`` per server; 0: the first failure ends `tritonsm serve`.
        window_s: The window, in seconds.
        unhealthy_after_s: How long ``/ping`` may fail (not 200, or no answer) before a running server is replaced.
    """

    max_restarts: int = DEFAULT_MAX_RESTARTS
    window_s: float = DEFAULT_WINDOW_S
    unhealthy_after_s: float = DEFAULT_UNHEALTHY_AFTER_S

    def __post_init__(self) -> None:
        if self.max_restarts < 0:
            raise LocalEndpointError(f"--max-restarts {self.max_restarts}: give 0 or more (0: stop on the first "
                                     "failure)")
        for flag, value in (("--restart-window", self.window_s), ("--unhealthy-after", self.unhealthy_after_s)):
            if not value > 0:
                raise LocalEndpointError(f"{flag} {value:g}: give a number of seconds above 0")

    @property
    def bound(self) -> str:
        return f"at most {self.max_restarts} within {self.window_s:g} s"


class Supervisor:
    """One served Triton server's watch: its health, its restarts within the bound, and what callers are told.

    Args:
        policy: The restart bound and the unhealthy time.
        what: Names the server in every message ("the Triton server", "the Triton server of variant B").
        clock: Monotonic seconds (a test may move it on).
    """

    def __init__(self, policy: RestartPolicy, what: str = TRITON,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.policy = policy
        self.what = what
        self.restarting: Optional[str] = None   # why, while a restart is under way
        self._clock = clock
        self._recent: list[float] = []          # when each restart within the window began
        self._unready_since: Optional[float] = None

    def trouble(self, process: TritonProcess, ping_port: int) -> Optional[str]:
        """Why ``process`` must be replaced, or None while it serves (or has not failed /ping for long enough)."""
        code = process.exit_code()
        if code is not None:
            return f"{self.what} exited unexpectedly with {describe_exit(code)}"
        status = ping(ping_port)
        if status == 200:
            self._unready_since = None
            return None
        now = self._clock()
        if self._unready_since is None:
            self._unready_since = now
        if now - self._unready_since < self.policy.unhealthy_after_s:
            return None
        last = f"HTTP {status}" if status is not None else "no answer"
        return f"{self.what} did not answer /ping with 200 for {self.policy.unhealthy_after_s:g} s (last: {last})"

    def down(self, process: Optional[TritonProcess]) -> Optional[str]:
        """Why the server does not serve right now (exited, or being restarted), for callers; None while it runs.
        Not the unhealthy time: a slow /ping is not a failure until the supervisor says so."""
        if self.restarting is not None:
            return self.restarting
        code = process.exit_code() if process is not None else None
        return None if code is None else f"{self.what} exited unexpectedly with {describe_exit(code)}"

    def watch(self, process: TritonProcess, ping_port: int, restart: Callable[[], TritonProcess],
              label: str) -> TritonProcess:
        """The server serving now: ``process``, or the one ``restart`` started in its place (after a failed start,
        again, within the bound). ``label`` heads the console lines ("endpoint NAME"). Raises RestartLimitError
        once the bound is reached."""
        reason = self.trouble(process, ping_port)
        if reason is None:
            return process
        tail, log = process.log_tail(), process.log_path
        while True:
            self._count_restart(reason, label, log, tail)
            told = (f"{reason}; restarting it (restart {len(self._recent)} of {self.policy.bound}), as SageMaker "
                    "replaces a failed container")
            print(f"warning: {label}: {told}; last lines of its log ({log}):\n{tail}", file=sys.stderr, flush=True)
            process.note(f"tritonsm serve: {told}")
            self.restarting = reason
            started = self._clock()
            try:
                process.kill()   # what is left of it: a hung server, its Python-backend stubs
                process = restart()
            except (ServerStartError, PortInUseError) as error:   # counted too: one that cannot start again ends
                # in the bound (the port: taken by another process the moment the dead server let it go)
                first, *rest = str(error).splitlines()
                reason, tail = f"{self.what} did not start again ({first.split('; last lines of its log')[0]})", \
                    "\n".join(rest)
                continue
            finally:
                self.restarting = None
            self._unready_since = None
            print(f"{label}: {self.what} serves again (restarted in {self._clock() - started:.1f} s)", flush=True)
            return process

    def _count_restart(self, reason: str, label: str, log: object, tail: str) -> None:
        """One more restart within the window, or RestartLimitError once the bound is reached."""
        now = self._clock()
        self._recent = [at for at in self._recent if now - at < self.policy.window_s]
        if len(self._recent) >= self.policy.max_restarts:
            raise RestartLimitError(
                f"{label}: {reason}, and it has been restarted {len(self._recent)} time(s) within "
                f"{self.policy.window_s:g} s, the most allowed (--max-restarts {self.policy.max_restarts}, "
                f"--restart-window {self.policy.window_s:g}); `tritonsm serve` stops: fix what the log shows and "
                f"serve again (or allow more restarts with --max-restarts); last lines of its log ({log}):\n{tail}")
        self._recent.append(now)
