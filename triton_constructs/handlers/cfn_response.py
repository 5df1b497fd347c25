"""The reply every custom resource handler here sends CloudFormation (to the pre-signed ResponseURL).

Shared by the handlers of this folder, which is one Lambda asset; runs in AWS Lambda only.
"""
from __future__ import annotations

import json
import logging
import urllib.request
from typing import Any

LOG = logging.getLogger()


def respond(event: dict[str, Any], status: str, reason: str, physical_id: str) -> None:
    body = json.dumps({
        "Status": status, "Reason": reason, "PhysicalResourceId": physical_id, "StackId": event["StackId"],
        "RequestId": event["RequestId"], "LogicalResourceId": event["LogicalResourceId"],
    }).encode()
    request = urllib.request.Request(event["ResponseURL"], data=body, method="PUT",
                                     headers={"Content-Type": "", "Content-Length": str(len(body))})
    with urllib.request.urlopen(request, timeout=60) as response:  # noqa: S310 (a pre-signed https URL)
        LOG.info("CloudFormation response: %s", response.status)
