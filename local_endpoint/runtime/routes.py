"""InvokeEndpoint, as SageMaker's runtime answers it, in front of local endpoints' container contract.

The operation (botocore ``data/sagemaker-runtime/2017-05-13/service-2.json``, ``InvokeEndpoint``) is
``POST /endpoints/{EndpointName}/invocations``; the request headers it defines are ``Content-Type``,
``Accept``, ``X-Amzn-SageMaker-Custom-Attributes``, ``-Target-Model``, ``-Target-Variant``,
``-Target-Container-Hostname``, ``-Inference-Id``, ``-Enable-Explanations``, ``-Inference-Component`` and
``-Session-Id``; the answer carries the body, its ``Content-Type``, ``x-Amzn-Invoked-Production-Variant``
and the container's ``X-Amzn-SageMaker-Custom-Attributes``. SageMaker passes the container
``POST /invocations`` with the body and the headers it supports (the API reference: "strips all POST
headers except those supported by the API"), the target model of a multi-model endpoint in
``X-Amzn-SageMaker-Target-Model`` (https://docs.aws.amazon.com/sagemaker/latest/dg/invoke-multi-model-endpoint.html).
Here the endpoint's local front (the container itself, the multi-model front door or the
inference-component router) takes that request.
"""
from __future__ import annotations

import dataclasses
import http.client
import socket
import time
import urllib.parse
import uuid
from typing import Callable, Iterable, Mapping, Optional, Protocol, Union

from deployment_spec.sections.endpoint import EndpointKind
from local_endpoint.client.http_call import HttpReply, call
from local_endpoint.client.invoke import INFERENCE_COMPONENT_HEADER as INFERENCE_COMPONENT
from local_endpoint.client.invoke import TARGET_MODEL_HEADER as TARGET_MODEL
from local_endpoint.runtime import errors
from local_endpoint.runtime.errors import RuntimeReply
from local_endpoint.server.generate_route import GenerateRoute

SME, MME, COMPONENTS = EndpointKind.SINGLE_MODEL, EndpointKind.MULTI_MODEL, EndpointKind.INFERENCE_COMPONENTS
CUSTOM_ATTRIBUTES = "X-Amzn-SageMaker-Custom-Attributes"
INFERENCE_ID = "X-Amzn-SageMaker-Inference-Id"
TARGET_VARIANT = "X-Amzn-SageMaker-Target-Variant"   # InvokeEndpointInput.TargetVariant
# What reaches the container besides the body (InvokeEndpointInput's header members that a container reads).
FORWARDED = ("Content-Type", "Accept", CUSTOM_ATTRIBUTES, TARGET_MODEL, INFERENCE_COMPONENT, INFERENCE_ID)
INVOKED_VARIANT = "x-Amzn-Invoked-Production-Variant"   # InvokeEndpointOutput.InvokedProductionVariant
PATH_PREFIX, PATH_SUFFIX = "/endpoints/", "/invocations"
INVOKE_TIMEOUT = 60.0   # "A customer's model containers must respond to requests within 60 seconds" (InvokeEndpoint)
MAX_BODY_BYTES = 6_291_456   # InvokeEndpointInput.Body: BodyBlob, max 6291456 (botocore's service model)
# Where a request too large or too slow for InvokeEndpoint belongs.
ASYNC_HINT = ("a larger or slower request belongs on an asynchronous endpoint (an asynchronous: block in the spec: "
              "payloads up to 1 GB through S3, up to an hour each; docs/howto/asynchronous.md)")


class VariantTraffic(Protocol):
    """An endpoint's production variants and shadow (``local_endpoint.variants``): which variant answers a request,
    and what happens once it has (a copy to the shadow, data capture)."""

    def choose(self, target: "RuntimeTarget", headers: Mapping[str, str]) -> Union["RuntimeTarget", RuntimeReply]:
        """``target`` pointed at the variant that answers (``headers``: names in lower case), or the refusal."""
        ...

    def answered(self, target: "RuntimeTarget", headers: Mapping[str, str], body: bytes, reply: RuntimeReply,
                 started: float, latency_ms: float) -> None:
        """After the variant answered (``started``: time.time() when it was called); must not block."""
        ...

    @property
    def streams(self) -> bool:
        """Whether a production variant's model is decoupled (InvokeEndpointWithResponseStream reaches it)."""
        ...


@dataclasses.dataclass(frozen=True)
class RuntimeTarget:
    """One local endpoint as InvokeEndpoint addresses it.

    Args:
        name: Its EndpointName, the deployed name ``<project>-<environment>-<endpoint>``.
        kind: Single-model, multi-model or inference components.
        port: Where its container contract (``POST /invocations``) answers on the loopback address.
        variant: The production variant's name (``x-Amzn-Invoked-Production-Variant``).
        target_models: MME: the TargetModel values it serves (its archives' names).
        components: Inference components: the InferenceComponentName values it serves.
        loaded: MME: the target models loaded right now (a cold one may answer ModelNotReadyException).
        log: Its server log(s), named in a ModelError's message.
        component_logs: Inference components: each component's own server log, named instead where a request
            names the component.
        traffic: An endpoint with variants or a shadow: routes each request to a variant (its port, name and log).
        health: Its server's state under `tritonsm serve`'s supervision (the local endpoint itself); None where it
            has none (a container in its image).
        generate: A single-model endpoint whose model is decoupled: its generate-stream route, which answers
            InvokeEndpoint and InvokeEndpointWithResponseStream (``streaming``) as the container in generate_stream
            mode answers ``/invocations``.
        component_routes: Inference components: the generate-stream route of each component whose model is
            decoupled (each component is a container of its own, in its own mode), by InferenceComponentName.
    """

    name: str
    kind: EndpointKind
    port: int
    variant: str = "AllTraffic"
    target_models: tuple[str, ...] = ()
    components: tuple[str, ...] = ()
    loaded: Optional[Callable[[], list[str]]] = None
    log: str = ""
    traffic: Optional[VariantTraffic] = None
    health: Optional["Health"] = None
    generate: Optional[GenerateRoute] = None
    component_routes: Mapping[str, GenerateRoute] = dataclasses.field(default_factory=dict)
    component_logs: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def log_for(self, headers: Mapping[str, str]) -> str:
        """The server log a ModelError names (``headers``: names in lower case): the named inference component's
        own, else the endpoint's."""
        return self.component_logs.get(headers.get(INFERENCE_COMPONENT.lower(), ""), self.log)

    def stream_route(self, headers: Mapping[str, str]) -> Optional[GenerateRoute]:
        """The generate-stream route a request reaches (``headers``: names in lower case): the endpoint's, or the
        named inference component's; None where the model it reaches is not decoupled."""
        if self.kind is COMPONENTS:
            return self.component_routes.get(headers.get(INFERENCE_COMPONENT.lower(), ""))
        return self.generate

    @property
    def streams(self) -> bool:
        return self.generate is not None or bool(self.component_routes) or bool(self.traffic and self.traffic.streams)


class Health(Protocol):
    """A local endpoint's servers as `tritonsm serve` supervises them (``LocalEndpointLifecycle``)."""

    @property
    def supervised(self) -> bool:
        """Whether a supervisor restarts its servers (only `tritonsm serve` does)."""
        ...

    def down(self) -> Optional[str]:
        """Why one of its supervised servers does not serve right now (exited, or being restarted), else None."""
        ...


DOWN_NOTICE_S = 1.0   # a killed server's connection drops a moment before its exit shows: look this long for it


def down_reason(target: RuntimeTarget, wait_s: float = DOWN_NOTICE_S) -> Optional[str]:
    """Why ``target``'s supervised server does not serve, waiting up to ``wait_s`` for a failure to show; None at
    once where nothing supervises it."""
    health = target.health
    if health is None or not health.supervised:
        return None
    deadline = time.monotonic() + wait_s
    while (reason := health.down()) is None and time.monotonic() < deadline:
        time.sleep(0.05)
    return reason


def endpoint_in_path(path: str, suffix: str = PATH_SUFFIX) -> Optional[str]:
    """The EndpointName of ``/endpoints/{EndpointName}/invocations`` (URL-decoded), else None; ``suffix``:
    another operation's (InvokeEndpointAsync's ``/async-invocations``)."""
    path = path.split("?", 1)[0]
    if not (path.startswith(PATH_PREFIX) and path.endswith(suffix)):
        return None
    name = path[len(PATH_PREFIX):-len(suffix)]
    return urllib.parse.unquote(name) if name and "/" not in name else None


def invoke(targets: Mapping[str, RuntimeTarget], name: str, headers: Mapping[str, str], body: bytes,
           timeout: float = INVOKE_TIMEOUT) -> RuntimeReply:
    """One InvokeEndpoint call: checked as SageMaker checks it, then sent to the endpoint's container."""
    headers = {key.lower(): value for key, value in headers.items()}   # HTTP header names ignore case
    target = checked_target(targets, name, headers, body)
    if isinstance(target, RuntimeReply):
        return target
    traffic = target.traffic
    if traffic is not None:
        chosen = traffic.choose(target, headers)
        if isinstance(chosen, RuntimeReply):
            return chosen
        target = chosen
    started, clock = time.time(), time.perf_counter()
    reply = _answer(target, name, headers, body, timeout)
    if traffic is not None:
        traffic.answered(target, headers, body, reply, started, (time.perf_counter() - clock) * 1000)
    return reply


def checked_target(targets: Mapping[str, RuntimeTarget], name: str, headers: Mapping[str, str],
                   body: bytes) -> Union[RuntimeTarget, RuntimeReply]:
    """The endpoint a call addresses, or SageMaker's refusal of the call (``headers``: names in lower case)."""
    if len(body) > MAX_BODY_BYTES:
        return errors.content_too_large(MAX_BODY_BYTES, f"the body has {len(body):,} bytes; InvokeEndpoint takes at "
                                                        f"most {MAX_BODY_BYTES:,}: {ASYNC_HINT}")
    target = targets.get(name)
    if target is None:
        return unknown_endpoint(name, targets)
    return _check_headers(target, headers) or target


def _answer(target: RuntimeTarget, name: str, headers: Mapping[str, str], body: bytes,
            timeout: float) -> RuntimeReply:
    """The container's answer as InvokeEndpoint returns it (``headers``: names in lower case)."""
    was_loaded = target.loaded() if target.loaded else None
    try:
        reply = send_to_container(target, headers, body, timeout)
    except (socket.timeout, TimeoutError):
        model = headers.get(TARGET_MODEL.lower())
        if was_loaded is not None and model not in was_loaded:
            return errors.model_not_ready(
                f"Model {model} of endpoint {name} is still loading (it was not loaded and {timeout:g} s passed); "
                "loading goes on: wait and try your request again")
        return errors.model_error(
            name, target.variant, 0, f"Your invocation timed out while waiting for a response from container "
            f"{target.variant} ({timeout:g} s). Review the server log, resolve the issue, and try again; "
            f"{ASYNC_HINT}.", target.log_for(headers))
    except (OSError, http.client.HTTPException) as error:   # refused, or the connection dropped mid-answer
        return unavailable(target, name, error)
    if reply.status == 502 and target.kind is not SME and down_reason(target, 0) is not None:
        return unavailable(target, name, reply.body.decode(errors="replace"))   # the front said so: restarting
    if reply.status >= 400:
        return errors.model_error(name, target.variant, reply.status,
                                  reply.body.decode(errors="replace"), target.log_for(headers))
    answer = {"Content-Type": reply.content_type or "application/octet-stream",
              INVOKED_VARIANT: target.variant, "x-amzn-RequestId": str(uuid.uuid4())}
    if reply.headers.get(CUSTOM_ATTRIBUTES.lower()):
        answer[CUSTOM_ATTRIBUTES] = reply.headers[CUSTOM_ATTRIBUTES.lower()]
    return RuntimeReply(reply.status, answer, reply.body)


def unavailable(target: RuntimeTarget, name: str, error: object) -> RuntimeReply:
    """SageMaker's ServiceUnavailable (503) while the endpoint's container is down: why, when it is being
    restarted."""
    down = down_reason(target)
    if down is not None:
        return errors.service_unavailable(
            f"Endpoint {name} is restarting its model container: {down}. `tritonsm serve` starts it again, as "
            "SageMaker replaces a failed container; try your call again in a few seconds")
    return errors.service_unavailable(
        f"Endpoint {name}: its local server did not answer ({error}); see `tritonsm serve`'s output "
        "and the server log. Try your call again once it runs")


def unknown_endpoint(name: str, served: Iterable[str]) -> RuntimeReply:
    """SageMaker's ValidationError for an EndpointName this runtime does not serve."""
    return errors.validation_error(
        f"Endpoint {name} of account {errors.LOCAL_ACCOUNT} not found. This local runtime serves "
        f"{', '.join(sorted(served))}; pass one of them as EndpointName (the deployed name "
        "<project>-<environment>-<endpoint> of the spec's environment)")


def unknown_variant(name: str, variant: str, production: Iterable[str], shadow: Optional[str] = None) -> RuntimeReply:
    """SageMaker's ValidationError for a TargetVariant that is none of the endpoint's production variants. The
    wording is this runtime's (SageMaker's own is not published). A shadow variant is refused too: TargetVariant
    names "the production variant to send the inference request to" (InvokeEndpoint's API reference), and a shadow
    only receives copies of the production variant's requests (developer guide, "Shadow tests")."""
    names = ", ".join(production)
    if variant == shadow:
        return errors.validation_error(
            f"TargetVariant {variant} of endpoint {name} is its shadow variant, which only receives copies of the "
            f"production variant's requests and never answers a caller; pass a production variant ({names}) or "
            "leave TargetVariant out")
    return errors.validation_error(
        f"TargetVariant {variant} is not a production variant of endpoint {name}; pass one of: {names}, or leave "
        "TargetVariant out to route by the variants' weights")


def send_to_container(target: RuntimeTarget, headers: Mapping[str, str], body: bytes, timeout: float) -> HttpReply:
    """The container contract's ``POST /invocations`` with the body and the headers SageMaker passes on
    (``FORWARDED``, names in any case); a decoupled model's generate-stream route instead, whose whole
    ``text/event-stream`` answer the container in generate_stream mode returns there (an error before the first
    event: its ``{"error": ...}`` as Triton's other routes answer it). Raises OSError (socket.timeout past
    ``timeout``) if nothing answers."""
    given = {key.lower(): value for key, value in headers.items()}
    route = target.stream_route(given)
    if route is not None:
        reply = call("127.0.0.1", route.port, "POST", route.path, body=body,
                     headers={"Content-Type": "application/json"}, timeout=timeout)
        return dataclasses.replace(reply, body=sse_error(reply.body)) if reply.status >= 400 else reply
    forwarded = {key: given[key.lower()] for key in FORWARDED if given.get(key.lower())}
    return call("127.0.0.1", target.port, "POST", "/invocations", body=body, headers=forwarded, timeout=timeout)


def _check_headers(target: RuntimeTarget, headers: Mapping[str, str]) -> Optional[RuntimeReply]:
    """A ValidationError for a TargetModel or InferenceComponentName this endpoint does not take (``headers``:
    names in lower case)."""
    model, component = headers.get(TARGET_MODEL.lower()), headers.get(INFERENCE_COMPONENT.lower())
    variant = headers.get(TARGET_VARIANT.lower())
    if variant and target.traffic is None and variant != target.variant:
        return unknown_variant(target.name, variant, [target.variant])
    if target.kind != MME and model:
        return errors.validation_error(
            f"Endpoint {target.name} is not a multi-model endpoint and does not support target model header. "
            f"Leave TargetModel out (it is {target.kind.value}).", "TARGET_MODEL_HEADER_NOT_SUPPORTED")
    if target.kind == MME and model not in target.target_models:
        said = (f"TargetModel {model!r} is not one of its models" if model else
                "the request is missing a target model header")
        return errors.validation_error(
            f"Endpoint {target.name} is a multi-model endpoint and {said}; pass TargetModel, one of: "
            f"{', '.join(target.target_models)} (tritonsm invoke --model resolves a model name)")
    if target.kind != COMPONENTS and component:
        return errors.validation_error(
            f"Endpoint {target.name} hosts no inference components ({target.kind.value}); leave InferenceComponentName "
            f"out (got {component!r})")
    if target.kind == COMPONENTS and component not in target.components:
        said = (f"InferenceComponentName {component!r} is not one of them" if component else
                "Inference Component Name header is required for endpoints to which you plan to deploy "
                "inference components")
        return errors.validation_error(
            f"Endpoint {target.name} hosts inference components and {said}; pass InferenceComponentName, one of: "
            f"{', '.join(target.components)}")
    return None


def sse_error(body: bytes) -> bytes:
    """Triton's ``{"error": ...}`` in a generate-stream answer's ``data: {"error": ...}`` event (else ``body``)."""
    text = body.strip()
    return text[len(b"data:"):].strip() if text.startswith(b"data:") else body
