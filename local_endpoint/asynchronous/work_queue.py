"""The queue in front of one asynchronous endpoint's container, and the workers that empty it in order.

SageMaker sends one instance at most ``MaxConcurrentInvocationsPerInstance`` requests at a time; locally there is
one instance, so that many worker threads take requests first come, first served. Each request ends in exactly
one object (``Job.ended``, claimed under the lock before anything is written) and one notification.

When `tritonsm serve` supervises the container (``local_endpoint.server.supervision``) and it goes down, the queue
outlives it as SageMaker's does: workers take no request while it is down, and a request it had when it went down
(``Interrupted``) is sent again once it serves, once only: a request that was in flight at two failures ends in a
failure object (it may be what kills the server). The model may so see a request twice; the request still ends in
exactly one object. Without a supervisor (a ``LocalRuntime`` used directly) a container that dies fails what is
queued and in flight with its exit, as nothing would restart it.
When the queue stops (`tritonsm serve` ends), what is still queued, and what is still in flight after a grace
period, gets a failure object saying so before the local S3 goes: nothing accepted is dropped without a word.
"""
from __future__ import annotations

import collections
import json
import sys
import threading
import time
from typing import Callable

from deployment_spec.sections.asynchronous import Asynchronous
from local_endpoint.asynchronous import failures, notifications
from local_endpoint.asynchronous.aws_server import LocalAws
from local_endpoint.asynchronous.failures import Failure
from local_endpoint.asynchronous.job import Job, new_job
from local_endpoint.asynchronous.locations import AsyncLocations
from local_endpoint.asynchronous.processing import Answer, Container, Interrupted, Outcome, process
from local_endpoint.runtime.routes import down_reason
from local_endpoint.asynchronous.request import AsyncRequest

STOP_GRACE_S = 10.0   # how long stop() lets requests in flight finish before it writes their failure
DOWN_POLL_S = 0.2     # how often a worker looks whether a container that is down serves again


class AsyncQueue:
    """Accepted requests of one endpoint, processed ``max_concurrent_invocations_per_instance`` at a time.

    Args:
        endpoint_name: Its EndpointName (the notifications' ``endpointName``).
        settings: The spec's ``asynchronous`` block: concurrency, payload limit, default TTL and timeout,
            notification content.
        locations: Its S3 locations and SNS topics, created in ``aws`` (``LocalAws.provision``).
        aws: The local S3/SNS/SQS server.
        container: The endpoint's container contract and crash check.
        clock: Monotonic seconds, for the TTL (a test moves it on).
    """

    def __init__(self, endpoint_name: str, settings: Asynchronous, locations: AsyncLocations, aws: LocalAws,
                 container: Container, clock: Callable[[], float] = time.monotonic) -> None:
        self.endpoint_name = endpoint_name
        self.settings = settings
        self.locations = locations
        self._aws_url = aws.url
        workers = settings.max_concurrent_invocations_per_instance
        self._s3 = aws.client("s3", locations.success_topic.region, max_connections=workers + 2)
        self._sns = {topic.arn: aws.client("sns", topic.region, max_connections=workers + 2)
                     for topic in (locations.success_topic, locations.error_topic)}
        self._container = container
        self._clock = clock
        self._lock = threading.Condition()
        self._waiting: collections.deque[Job] = collections.deque()
        self._in_flight: set[Job] = set()
        self._stopping = False
        self._threads = [threading.Thread(target=self._work, name=f"async-{endpoint_name}-{n}", daemon=True)
                         for n in range(workers)]

    def start(self) -> AsyncQueue:
        for thread in self._threads:
            thread.start()
        return self

    def submit(self, request: AsyncRequest) -> Job:
        """Queue an accepted request; its output and failure locations are known from here on."""
        with self._lock:
            if self._stopping:
                raise RuntimeError("the queue is stopping")   # the front stops first: no request gets here
            job = new_job(request, self.locations, self._clock())
            self._waiting.append(job)
            self._lock.notify()
        return job

    @property
    def waiting(self) -> int:
        """Requests no worker has taken yet."""
        with self._lock:
            return len(self._waiting)

    def stop(self) -> None:
        """Fail what waits, give what runs ``STOP_GRACE_S`` to finish, then fail it too. Safe to call twice."""
        with self._lock:
            self._stopping = True
            waiting = list(self._waiting)
            self._waiting.clear()
            self._lock.notify_all()
        for job in waiting:
            self._end(job, failures.endpoint_stopped())
        deadline = time.monotonic() + STOP_GRACE_S
        for thread in self._threads:
            if thread.is_alive():
                thread.join(max(0.0, deadline - time.monotonic()))
        with self._lock:
            running = list(self._in_flight)
        for job in running:
            self._end(job, failures.endpoint_stopped())

    def _work(self) -> None:
        while True:
            with self._lock:
                while not self._waiting and not self._stopping:
                    self._lock.wait()
                if self._stopping:
                    return
                job = self._waiting.popleft()
                self._in_flight.add(job)
            outcome = self._outcome(job)
            if outcome is not None:   # None: the queue stops while the container is down; stop() fails the job
                self._end(job, outcome)
            with self._lock:
                self._in_flight.discard(job)

    def _outcome(self, job: Job) -> Outcome | None:
        """What ``job`` came to: sent once the container serves, and once more if it went down with the job."""
        interrupted: Interrupted | None = None
        while self._serving():
            try:
                outcome = process(job, settings=self.settings, s3=self._s3, s3_url=self._aws_url,
                                  container=self._container, clock=self._clock, inputs=self.locations.input)
            except Exception as error:   # a fault of this code: the request still gets its object, with the error
                return Failure.said(f"The local endpoint failed on this request ({type(error).__name__}: {error}); "
                                    "please report it with the request.")
            if not isinstance(outcome, Interrupted):
                return outcome
            if interrupted is not None:
                return failures.interrupted_twice(interrupted.reason, outcome.reason, self._container.target.log)
            interrupted = outcome
        return None

    def _serving(self) -> bool:
        """Wait while the container is down (being restarted); False once the queue stops."""
        while down_reason(self._container.target, 0) is not None:
            with self._lock:
                if self._stopping:
                    return False
                self._lock.wait(DOWN_POLL_S)
        with self._lock:
            return not self._stopping

    def _end(self, job: Job, outcome: Outcome) -> None:
        """Write ``job``'s one object and publish its notification, unless it has ended already."""
        with self._lock:
            if job.ended:
                return
            job.ended = True
        answered = isinstance(outcome, Answer)
        place = job.output if answered else job.failure
        try:
            self._s3.put_object(Bucket=place.bucket, Key=place.key, Body=outcome.body,
                                ContentType=outcome.content_type)
        except Exception as error:   # the local S3 is gone (serve is stopping): nowhere left to write
            print(f"warning: {self.endpoint_name}: could not write {place.url} ({error}); inference "
                  f"{job.request.inference_id} has no object", file=sys.stderr, flush=True)
            return
        self._notify(job, outcome, place.url)

    def _notify(self, job: Job, outcome: Outcome, location: str) -> None:
        failure = outcome if isinstance(outcome, Failure) else None
        topic = self.locations.error_topic if failure else self.locations.success_topic
        # The answer rides along when asked for and there is one (the container's body, also when it refused).
        included = self.settings.include_response_in_notifications and (failure is None or failure.from_container)
        message = notifications.message(
            region=topic.region, endpoint_name=self.endpoint_name, request=job.request,
            content_type=outcome.content_type, location_key="failureLocation" if failure else "outputLocation",
            location=location, failure_reason=failure.reason if failure else None,
            body=outcome.body if included else None)
        try:
            self._sns[topic.arn].publish(TopicArn=topic.arn, Message=json.dumps(message))
        except Exception as error:
            print(f"warning: {self.endpoint_name}: could not publish to {topic.arn} ({error})", file=sys.stderr,
                  flush=True)
