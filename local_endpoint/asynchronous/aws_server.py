"""The local S3, SNS and SQS of asynchronous endpoints: moto's server, a child process on 127.0.0.1.

moto (``python -m moto.server -H HOST -p PORT``, moto 5.2.5) answers the real AWS APIs, so an application's boto3
code reaches it with only ``AWS_ENDPOINT_URL_S3`` / ``_SNS`` / ``_SQS`` set (botocore's service-specific endpoint
variables). It runs as a child process like the Triton server (``server_process``): its own session, its output in
a log file, SIGTERM when ``tritonsm serve`` stops and when its parent dies; never in-process, where its request
mocking would catch the runtime's own HTTP calls. Everything lives in its memory and goes when it stops.
"""
from __future__ import annotations

import importlib.util
import os
import pathlib
import sys
import tempfile
import time
from typing import Any, Optional

from local_endpoint.asynchronous.locations import AsyncLocations, Topic
from local_endpoint.client.local_clients import local_client
from local_endpoint.errors import LocalEndpointError, ServerStartError
from local_endpoint.runtime.errors import LOCAL_ACCOUNT
from local_endpoint.server import ports
from local_endpoint.server.server_process import POLL_SECONDS, LoggedProcess, http_status

NAME = "the local S3/SNS/SQS server (moto)"
READY_PATH = "/moto-api/data.json"   # moto's own state dump: 200 once its app answers
STARTUP_TIMEOUT = 30.0


class LocalAws:
    """moto's server for every asynchronous endpoint of one ``tritonsm serve``.

    Args:
        account: The one AWS account its resources live in (the account of the topics a spec names).
        port: Where it listens on 127.0.0.1. Defaults to a free port.
        log_path: Its log. Defaults to a file under the temp directory (``tritonsm-logs/``).
    """

    def __init__(self, *, account: str = LOCAL_ACCOUNT, port: Optional[int] = None,
                 log_path: Optional[pathlib.Path] = None, startup_timeout: float = STARTUP_TIMEOUT) -> None:
        self.account = account
        self._requested_port = port
        self._requested_log = log_path
        self.startup_timeout = startup_timeout
        self.port: Optional[int] = None
        self._process: Optional[LoggedProcess] = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Optional[pathlib.Path]:
        return self._process.log_path if self._process else None

    def start(self) -> LocalAws:
        if importlib.util.find_spec("moto") is None:
            raise LocalEndpointError(
                "an asynchronous endpoint needs moto's server for its local S3, SNS and SQS, and moto is not "
                f"installed: {sys.executable} -m pip install 'moto[s3,sns,sqs]==5.2.5' Flask flask-cors "
                "(or install this package with its [local] extra)")
        self.port = ports.claim(self._requested_port)
        log_path = self._requested_log or (pathlib.Path(tempfile.gettempdir()) / "tritonsm-logs"
                                           / f"moto-port{self.port}-pid{os.getpid()}.log")
        command = [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)]
        self._process = LoggedProcess(command, {**os.environ, "MOTO_ACCOUNT_ID": self.account}, log_path, NAME)
        try:
            self._wait_until_ready()
        except BaseException:   # Ctrl-C while waiting too: leave no server behind
            self.stop()
            raise
        return self

    def _wait_until_ready(self) -> None:
        assert self._process is not None and self.port is not None
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            self._process.raise_if_exited_during_start()
            if http_status(self.port, READY_PATH) == 200:
                return
            time.sleep(POLL_SECONDS)
        raise ServerStartError(f"{NAME} did not answer {READY_PATH} within {self.startup_timeout:g} s; last lines of "
                               f"its log ({self._process.log_path}):\n{self._process.log_tail()}")

    def check_running(self) -> None:
        """Raise ServerCrashedError, with its log tail, if the server has exited."""
        if self._process is not None:
            self._process.check_running()

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after a grace period. Safe to call twice."""
        if self._process is not None:
            self._process.stop()

    def client(self, service: str, region: str, max_connections: int = 10) -> Any:
        """A boto3 client of ``service`` in ``region`` pointed at this server."""
        return local_client(service, self.url, region, attempts=2, max_connections=max_connections)

    def provision(self, locations: AsyncLocations) -> None:
        """The buckets and the topics of one endpoint (creating what exists already changes nothing)."""
        s3 = self.client("s3", locations.success_topic.region)
        for bucket in locations.buckets:
            if bucket not in {b["Name"] for b in s3.list_buckets()["Buckets"]}:
                s3.create_bucket(Bucket=bucket, **_bucket_region(locations.success_topic.region))
        for topic in (locations.success_topic, locations.error_topic):
            self._create_topic(topic)

    def _create_topic(self, topic: Topic) -> None:
        made = self.client("sns", topic.region).create_topic(Name=topic.name)["TopicArn"]
        if made != topic.arn:   # moto's account or region differ from the ARN's: publishing would miss it
            raise LocalEndpointError(f"{NAME} created topic {made}, not {topic.arn}: the topics of one `tritonsm "
                                     "serve` must be in one AWS account locally; name topics of one account in "
                                     "success_topic_arn and error_topic_arn, or leave them out")


def _bucket_region(region: str) -> dict[str, Any]:
    """CreateBucket's location: none in us-east-1 (S3 refuses it there), the region elsewhere."""
    return {} if region == "us-east-1" else {"CreateBucketConfiguration": {"LocationConstraint": region}}
