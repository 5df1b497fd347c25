"""Which variant answers an InvokeEndpoint, and what follows the answer (``routes.VariantTraffic``).

CreateEndpointConfig's ``InitialVariantWeight`` (botocore's SageMaker model): each production variant takes its
weight's share of the traffic; InvokeEndpoint's ``TargetVariant`` "overrides the default behavior for the
endpoint, which is to distribute the invocation traffic based on the variant weights" (botocore's
sagemaker-runtime model), so a variant of weight 0 still answers when named. The answer names the variant in
``x-Amzn-Invoked-Production-Variant`` (``routes._answer``). After the answer: with a shadow, a copy of
``sampling_percent`` % of the requests goes to it (``shadow.ShadowWorker``); the production record of every
copied request is captured, and with the endpoint's ``data_capture``, ``sampling_percent`` % of all requests
(DataCaptureConfig.InitialSamplingPercentage) with the input, the output or both (its ``capture``); a copied
request's records always hold both, which a comparison needs.
"""
from __future__ import annotations

import dataclasses
import datetime
import json
import random
import uuid
from typing import Mapping, Optional, Sequence, Union

from local_endpoint.runtime.errors import RuntimeReply
from local_endpoint.runtime.routes import INFERENCE_ID, TARGET_VARIANT, RuntimeTarget, unknown_variant
from local_endpoint.server.generate_route import GenerateRoute
from local_endpoint.variants.capture import CaptureLog, Exchange, triton_message
from local_endpoint.variants.shadow import Copy, ShadowWorker


@dataclasses.dataclass(frozen=True)
class Route:
    """A production variant's server."""

    name: str
    port: int
    share: float   # of the traffic, 0-1
    log: str = ""
    generate: Optional[GenerateRoute] = None   # its model is decoupled: where it streams


@dataclasses.dataclass(frozen=True)
class Sampling:
    """What follows an answer: the share copied to the shadow, the share captured and which side of it."""

    shadow_percent: int = 0
    capture_percent: int = 0
    capture_input: bool = True
    capture_output: bool = True


class Traffic:
    """The routing of one endpoint with variants or a shadow; shared by the request threads (no state but the
    random generator and the counters of the worker and the log)."""

    def __init__(self, endpoint: str, routes: Sequence[Route], *, shadow: Optional[ShadowWorker] = None,
                 capture: Optional[CaptureLog] = None, sampling: Sampling = Sampling(),
                 rng: Optional[random.Random] = None) -> None:
        if not routes:
            raise ValueError("an endpoint needs one or more production variants")
        self.endpoint, self.routes, self.shadow, self.capture = endpoint, {r.name: r for r in routes}, shadow, capture
        self.sampling = sampling
        self._rng = rng or random.Random()
        self._names = [r.name for r in routes]
        self._weights = [r.share for r in routes]

    def choose(self, target: RuntimeTarget, headers: Mapping[str, str]) -> Union[RuntimeTarget, RuntimeReply]:
        wanted = headers.get(TARGET_VARIANT.lower())
        if wanted:
            route = self.routes.get(wanted)
            if route is None:
                shadow = self.shadow.target.variant if self.shadow else None
                return unknown_variant(target.name, wanted, self._names, shadow)
        else:
            route = self.routes[self._rng.choices(self._names, self._weights)[0]]
        return dataclasses.replace(target, port=route.port, variant=route.name, log=route.log, generate=route.generate)

    @property
    def streams(self) -> bool:
        return any(route.generate is not None for route in self.routes.values())

    def answered(self, target: RuntimeTarget, headers: Mapping[str, str], body: bytes, reply: RuntimeReply,
                 started: float, latency_ms: float) -> None:
        event_id = str(uuid.uuid4())
        inference_id = headers.get(INFERENCE_ID.lower())
        copied = False
        if self.shadow is not None and self._rng.random() * 100 < self.sampling.shadow_percent:
            copied = self.shadow.send(Copy(event_id, dict(headers), body, inference_id))
        captured = self._rng.random() * 100 < self.sampling.capture_percent
        if self.capture is None or not (copied or captured):
            return
        failed = reply.status >= 400
        both = copied   # a compared pair needs both sides
        self.capture.write(Exchange(
            self.endpoint, target.variant, event_id, datetime.datetime.fromtimestamp(started, datetime.timezone.utc),
            headers.get("content-type", ""), body if both or self.sampling.capture_input else None,
            reply.headers.get("Content-Type", ""),
            reply.body if (both or self.sampling.capture_output) and not failed else None,
            latency_ms, _failure(reply) if failed else None, inference_id))


def _failure(reply: RuntimeReply) -> str:
    """What went wrong, from InvokeEndpoint's error body: the container's own message where it answered."""
    try:
        error = json.loads(reply.body)
    except ValueError:
        return reply.body.decode(errors="replace")
    original = error.get("OriginalMessage") if isinstance(error, dict) else None
    if isinstance(original, str):
        return triton_message(original.encode())
    return str(error.get("Message", error)) if isinstance(error, dict) else str(error)
