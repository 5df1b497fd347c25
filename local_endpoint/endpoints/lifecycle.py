"""What every local endpoint does with what it started: its address, check it runs, stop it in order, ``with``.

A local endpoint holds up to three things: a front door (the multi-model and inference-component
routing, ``FrontDoor``), the servers behind it (``TritonProcess``, a container, or whole single-model
endpoints) and a private work folder with the unpacked models. Stopping goes from the outside in, so no
request reaches a server that is going away, and deletes the folder last, once nothing reads it. The servers of one
stop group stop at once (each Triton takes seconds to unload its models and exit; one after the other, an endpoint
of several waited for the sum); the groups, in order (``_stop_groups``).

`tritonsm serve` calls ``supervise`` instead of ``check_running``: an endpoint that owns a Triton server restarts
it when it fails (``local_endpoint.server.supervision``); a server that cannot be restarted (a container in its
image, the local S3) is only checked, and its crash ends the serve as before.
"""
from __future__ import annotations

import concurrent.futures
import pathlib
import shutil
from typing import Iterable, Optional, Protocol, Self

from local_endpoint.endpoints.mme_front_door import FrontDoor
from local_endpoint.server.supervision import RestartPolicy


class Server(Protocol):
    def check_running(self) -> None: ...

    def stop(self) -> None: ...


class LocalEndpointLifecycle:
    port: Optional[int] = None    # where clients reach the endpoint, once started
    _front_door: Optional[FrontDoor] = None
    _work_dir: Optional[pathlib.Path] = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Self:
        raise NotImplementedError

    def _servers(self) -> Iterable[Server]:
        """The servers this endpoint started (none before ``start``)."""
        raise NotImplementedError

    def _stop_groups(self) -> list[list[Server]]:
        """The servers in the order they stop: each group at once, after the group before it."""
        return [list(self._servers())]

    def check_running(self) -> None:
        """Raise ServerCrashedError, with the log tail, if a server died."""
        for server in self._servers():
            server.check_running()

    def supervise(self, policy: RestartPolicy, label: str) -> None:
        """Restart a server that failed, within ``policy`` (``label`` heads what is printed: "endpoint NAME"); only
        check the servers that cannot be restarted. Raises ServerCrashedError (RestartLimitError past the bound)."""
        for server in self._servers():
            supervise = getattr(server, "supervise", None)
            if supervise is not None:
                supervise(policy, label)
            else:
                server.check_running()

    @property
    def supervised(self) -> bool:
        """Whether `tritonsm serve` supervises one of its servers (``supervise`` has been called)."""
        return any(getattr(server, "supervised", False) for server in self._servers())

    def down(self) -> Optional[str]:
        """Why one of its supervised servers does not serve right now (exited, or being restarted), else None."""
        for server in self._servers():
            reason = getattr(server, "down", lambda: None)()
            if reason is not None:
                return str(reason)
        return None

    def stop(self) -> None:
        """Stop the front door, then the servers, then delete the unpacked models. Safe to call twice."""
        if self._front_door is not None:
            self._front_door.stop()
            self._front_door = None
        for group in self._stop_groups():
            _stop_together(group)
        if self._work_dir is not None:
            shutil.rmtree(self._work_dir, ignore_errors=True)
            self._work_dir = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *_exc_info: object) -> None:
        self.stop()


def _stop_together(servers: list[Server]) -> None:
    """Stop every server of ``servers`` at once; the first failure is raised once all have been asked."""
    if len(servers) < 2:
        for server in servers:
            server.stop()
        return
    with concurrent.futures.ThreadPoolExecutor(len(servers), thread_name_prefix="stop") as pool:
        stopping = [pool.submit(server.stop) for server in servers]
    failures = [error for error in (future.exception() for future in stopping) if error is not None]
    if failures:
        raise failures[0]
