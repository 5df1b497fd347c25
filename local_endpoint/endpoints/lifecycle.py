"""What every local endpoint does with what it started: its address, check it runs, stop it in order, ``with``.

A local endpoint holds up to three things: a front door (the multi-model and inference-component
routing, ``FrontDoor``), the servers behind it (``TritonProcess``, a container, or whole single-model
endpoints) and a private work folder with the unpacked models. Stopping goes from the outside in, so no
request reaches a server that is going away, and deletes the folder last, once nothing reads it.
"""
from __future__ import annotations

import pathlib
import shutil
from typing import Iterable, Optional, Protocol, Self

from local_endpoint.endpoints.mme_front_door import FrontDoor


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

    def check_running(self) -> None:
        """Raise ServerCrashedError, with the log tail, if a server died."""
        for server in self._servers():
            server.check_running()

    def stop(self) -> None:
        """Stop the front door, then the servers, then delete the unpacked models. Safe to call twice."""
        if self._front_door is not None:
            self._front_door.stop()
            self._front_door = None
        for server in self._servers():
            server.stop()
        if self._work_dir is not None:
            shutil.rmtree(self._work_dir, ignore_errors=True)
            self._work_dir = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *_exc_info: object) -> None:
        self.stop()
