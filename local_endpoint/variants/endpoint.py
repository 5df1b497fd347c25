"""One endpoint's variants on real Triton servers: each production variant and the shadow on a server of its own.

SageMaker runs each variant on instances of its own (CreateEndpointConfig's ProductionVariants and
ShadowProductionVariants each name a model and an instance type); locally each is a ``SingleModelEndpoint`` on a
free port of its own. The endpoint has no front of its own: the local SageMaker Runtime reads ``traffic`` and
sends each InvokeEndpoint to the chosen variant's port. ``port`` is the first production variant's, so the
container contract passed on by `tritonsm serve ENDPOINT` (``/ping``, ``/invocations``) reaches that variant, as a
plain ``curl`` reaches one container. Stopping goes: the shadow's copies, the capture log, then the servers.
"""
from __future__ import annotations

import dataclasses
import pathlib
import random
from typing import Optional, Protocol, Sequence

from deployment_spec.sections.endpoint import EndpointKind
from deployment_spec.served import LocalEndpoint
from local_endpoint.endpoints.lifecycle import LocalEndpointLifecycle, Server
from local_endpoint.endpoints.single_model import DEFAULT_STARTUP_TIMEOUT, SingleModelEndpoint
from local_endpoint.runtime.routes import INVOKE_TIMEOUT, RuntimeTarget
from local_endpoint.variants.capture import CaptureLog
from local_endpoint.variants.shadow import MAX_PENDING, ShadowWorker, check_queue_size
from local_endpoint.variants.traffic import Route, Sampling, Traffic


class VariantServer(Server, Protocol):
    """A variant's server, not started (a ``SingleModelEndpoint``)."""

    port: Optional[int]
    default_model: Optional[str]

    @property
    def log_path(self) -> object: ...

    @property
    def stand_in_notes(self) -> list[str]: ...

    def start(self) -> object: ...


@dataclasses.dataclass(frozen=True)
class Variant:
    """One variant: its name, what it serves (model, build manifest entry), its traffic share, its server."""

    name: str
    model: str
    build: str
    share: float     # production: of the traffic, 0-1
    shadow: bool
    server: VariantServer


class VariantsEndpoint(LocalEndpointLifecycle):
    """Start every variant's server, the capture log and the shadow's worker; ``traffic`` routes requests.

    Args:
        endpoint_name: The EndpointName (the capture folder's first level).
        variants: The production variants, then the shadow if any; at least one production variant.
        sampling: The share copied to the shadow and the share captured.
        capture: Where exchanges are written; None: nowhere.
        shadow_queue_size: The copies that may wait for the shadow's server; one that finds the queue full is
            dropped, counted and told (``shadow.ShadowWorker``).
        rng: The random choices (a seeded one in tests).
    """

    def __init__(self, endpoint_name: str, variants: Sequence[Variant], *, sampling: Sampling = Sampling(),
                 capture: Optional[CaptureLog] = None, invoke_timeout: float = INVOKE_TIMEOUT,
                 shadow_queue_size: int = MAX_PENDING, rng: Optional[random.Random] = None) -> None:
        self.endpoint_name = endpoint_name
        self.shadow_queue_size = check_queue_size(shadow_queue_size)
        self.production = [v for v in variants if not v.shadow]
        self.shadow = next((v for v in variants if v.shadow), None)
        if not self.production:
            raise ValueError("an endpoint with variants needs one or more production variants")
        self.sampling, self.capture, self.invoke_timeout, self._rng = sampling, capture, invoke_timeout, rng
        self.port: Optional[int] = None
        self.traffic: Optional[Traffic] = None
        self._worker: Optional[ShadowWorker] = None
        for variant in variants:   # whose server failed, in a restart's messages
            if isinstance(variant.server, SingleModelEndpoint):
                variant.server.server_name = f"the Triton server of variant {variant.name}"

    @property
    def variants(self) -> list[Variant]:
        return [*self.production, *([self.shadow] if self.shadow else [])]

    @property
    def log_path(self) -> str:
        return ", ".join(str(v.server.log_path) for v in self.variants if v.server.log_path)

    @property
    def stand_in_notes(self) -> list[str]:
        return [f"{v.name}: {note}" for v in self.variants for note in v.server.stand_in_notes]

    def start(self) -> VariantsEndpoint:
        """The capture log, every variant's server (one at a time: each loads its model), the shadow's worker."""
        try:
            if self.capture is not None:
                self.capture.start()   # first: an unwritable --capture-dir is told before any server starts
            for variant in self.variants:
                variant.server.start()
            self.port = self.production[0].server.port
            if self.shadow is not None:
                self._worker = ShadowWorker(self.endpoint_name, self._target(self.shadow), self.capture,
                                            timeout=self.invoke_timeout, max_pending=self.shadow_queue_size).start()
            routes = [Route(v.name, _port(v), v.share, str(v.server.log_path or ""),
                            getattr(v.server, "generate_route", None)) for v in self.production]
            self.traffic = Traffic(self.endpoint_name, routes, shadow=self._worker, capture=self.capture,
                                   sampling=self.sampling, rng=self._rng)
        except BaseException:
            self.stop()
            raise
        return self

    def _target(self, variant: Variant) -> RuntimeTarget:
        return RuntimeTarget(self.endpoint_name, EndpointKind.SINGLE_MODEL, _port(variant), variant.name,
                             log=str(variant.server.log_path or ""))

    def _servers(self) -> list[Server]:
        return [server for group in self._stop_groups() for server in group]

    def _stop_groups(self) -> list[list[Server]]:
        # The shadow's worker, then the capture it writes to (both read the variants' answers), then the variants.
        return [[self._worker] if self._worker else [], [self.capture] if self.capture else [],
                [v.server for v in self.variants]]

    def summary(self) -> str:
        """One line: the variants and their shares."""
        split = ", ".join(f"{v.name} {_percent(v.share)} %" for v in self.production)
        shadow = (f"; shadow {self.shadow.name} gets a copy of {self.sampling.shadow_percent} % of the requests"
                  if self.shadow else "")
        return f"single-model, {len(self.production)} production variant(s): {split}{shadow}"

    def notes(self) -> list[str]:
        """One line per variant (what it serves, its log), then where the captures go."""
        lines = []
        for v in self.variants:
            if v.shadow:
                role = (f"shadow, a copy of {self.sampling.shadow_percent} % of the requests, answers captured, "
                        "never returned")
            else:
                role = f"{_percent(v.share)} % of the requests" + (
                    " (TargetVariant only)" if v.share == 0 else "")
            lines.append(f"variant {v.name}: {role}; model {v.model} (build {v.build}, default model "
                         f"{v.server.default_model}); server log: {v.server.log_path}")
        if self.shadow is not None:
            lines.append(f"shadow {self.shadow.name}: up to {self.shadow_queue_size} copies wait for its server "
                         "(--shadow-queue-size); a copy that finds them full is dropped, and the drops are told here")
        if self.capture is None:
            return lines
        captured = self._captured()
        if captured:
            lines.append(f"captures: {self.capture.root / self.endpoint_name}/<variant>/YYYY/MM/DD/HH/*.jsonl "
                         f"({captured}; SageMaker Data Capture's records, which `tritonsm compare` reads)")
        else:
            lines.append("captures: none (no shadow and no data_capture); add data_capture to the endpoint to "
                         f"capture a share of the requests under {self.capture.root} for `tritonsm compare`")
        return lines

    def _captured(self) -> str:
        parts = []
        if self.shadow is not None:
            parts.append("every request copied to the shadow, with the shadow's answer under the same eventId")
        if self.sampling.capture_percent:
            parts.append(f"{self.sampling.capture_percent} % of all requests (data_capture)")
        return "; ".join(parts)


def _percent(share: float) -> str:
    return f"{round(share * 100, 1):g}"


def _port(variant: Variant) -> int:
    if variant.server.port is None:
        raise RuntimeError(f"variant {variant.name} has no port after start()")   # a programming error
    return variant.server.port


def for_spec_endpoint(local: LocalEndpoint, endpoint_name: str, *, capture_dir: Optional[pathlib.Path],
                      cpu_stand_in: bool = False, startup_timeout: float = DEFAULT_STARTUP_TIMEOUT,
                      log_dir: Optional[pathlib.Path] = None, shadow_queue_size: int = MAX_PENDING,
                      rng: Optional[random.Random] = None) -> VariantsEndpoint:
    """The variants of a spec endpoint (``LocalEndpoint.variants``), each on the local Triton server; logs in
    ``log_dir`` (``triton-<variant>.log``) or the temp directory."""
    spec = local.endpoint
    variants = [Variant(v.name, v.model, v.build, v.share, v.shadow, SingleModelEndpoint(
        v.tarball, default_model=v.default_model, env=v.env,
        log_file=log_dir / f"triton-{v.name}.log" if log_dir else None, startup_timeout=startup_timeout,
        cpu_stand_in=cpu_stand_in, triton_version=local.triton_version)) for v in local.variants]
    capture = spec.data_capture if spec is not None else None
    mode = capture.capture.value if capture is not None else "both"
    sampling = Sampling(spec.shadow.sampling_percent if spec is not None and spec.shadow else 0,
                        capture.sampling_percent if capture is not None else 0,
                        capture_input=mode in ("input", "both"), capture_output=mode in ("output", "both"))
    return VariantsEndpoint(endpoint_name, variants, sampling=sampling,
                            capture=CaptureLog(capture_dir) if capture_dir is not None else None,
                            shadow_queue_size=shadow_queue_size, rng=rng)
