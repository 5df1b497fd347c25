"""One accepted request in the queue: where its answer or its failure will be, and whether it has ended.

Object names follow what a deployed endpoint writes (a message quoted in ``notifications``): the answer is
``<output location><uuid>.out``, a name of its own, not the inference id (which the caller may choose and may hold
any printable character); the failure is ``<failure location><same uuid>-error.out`` (inferred: the failure name is
not shown in the documentation). InvokeEndpointAsync's ``S3OutputPathExtension`` goes between the location and
the name, and its ``Filename`` replaces the answer's name (botocore's descriptions of both; applying the extension
to the failure too is inferred).
"""
from __future__ import annotations

import dataclasses
import uuid

from local_endpoint.asynchronous.locations import AsyncLocations, S3Location
from local_endpoint.asynchronous.request import AsyncRequest


@dataclasses.dataclass(eq=False)   # hashed by identity: the queue's set of requests in flight
class Job:
    """A request from acceptance to its one answer or failure object.

    ``ended`` is set once, under the queue's lock, by whoever writes the object (a worker, or ``stop``): the other
    finds it set and writes nothing, so no request ever has two objects.
    """

    request: AsyncRequest
    output: S3Location
    failure: S3Location
    accepted_at: float   # the queue's clock (monotonic seconds): the TTL counts from here
    ended: bool = False


def new_job(request: AsyncRequest, locations: AsyncLocations, accepted_at: float) -> Job:
    stem = str(uuid.uuid4())
    extension = f"{request.output_extension}/" if request.output_extension else ""
    return Job(request, locations.output.child(extension + (request.filename or f"{stem}.out")),
               locations.failure.child(f"{extension}{stem}-error.out"), accepted_at)
