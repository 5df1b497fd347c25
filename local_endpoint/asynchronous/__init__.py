"""SageMaker Asynchronous Inference, locally: InvokeEndpointAsync in front of the real Triton server.

An application's own boto3 code runs unchanged against `tritonsm serve`, with endpoint URLs only: it uploads its
request to S3, calls ``invoke_endpoint_async`` on the local SageMaker Runtime, then polls for the object at
``OutputLocation`` (or ``FailureLocation``) or reads the SNS notification from an SQS queue it subscribed.

The parts, each a module here:

- ``aws_server``: the local S3, SNS and SQS are moto's server (``python -m moto.server``), a child process on
  127.0.0.1 that stops with `tritonsm serve` and dies with it, like the Triton server. Real AWS APIs, so the
  application's S3, SNS and SQS clients need only ``AWS_ENDPOINT_URL_S3`` / ``_SNS`` / ``_SQS``.
- ``locations``: the cloud's layout: ``async/<endpoint>/input|output|failure/`` in the bucket ``tritonsm-local``
  (the stage bucket's stand-in), or the spec's ``output_path`` / ``failure_path``; SNS topics
  ``<endpoint>-async-success`` / ``-error``, or the spec's ARNs, in their region and account.
- ``request`` and ``route``: ``POST /endpoints/{EndpointName}/async-invocations`` checked as SageMaker checks it
  (ValidationError for a TTL or timeout out of range, no payload or two, an endpoint that is not asynchronous),
  answered 202 with ``InferenceId``, ``OutputLocation`` and ``FailureLocation``; InvokeEndpoint on an asynchronous
  endpoint is refused.
- ``work_queue``, ``job`` and ``processing``: accepted requests wait in order in front of the container;
  ``max_concurrent_invocations_per_instance`` workers (one instance locally) each take one, drop it if it outlived
  its RequestTTLSeconds, read its input from the local S3 against ``max_payload_mb``, call the container's
  ``/invocations`` as InvokeEndpoint does with the InvocationTimeoutSeconds, then write ``<uuid>.out`` under the
  output location or ``<uuid>-error.out`` under the failure location, exactly one of them per request, and publish
  the notification (``notifications``: SageMaker's message, the answer included up to 128 KB when asked for).
- ``failures``: every way a request can fail ends in its failure object and error notification with a reason
  that names the value, the limit and the fix.
- A container that goes down: under `tritonsm serve` it is restarted (``local_endpoint.server.supervision``) while
  the queue and the local S3/SNS/SQS serve on; requests wait for it, and one it had when it went down is sent again
  once (``work_queue``). Without a supervisor, what is queued and in flight fails with its exit.
- ``service``: all of it for one local runtime (``LocalRuntime``), started after the endpoints, stopped before
  them.
"""
from local_endpoint.asynchronous.service import AsyncService, AsyncSetup

__all__ = ["AsyncService", "AsyncSetup"]
