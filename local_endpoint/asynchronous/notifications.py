"""The SNS message SageMaker publishes when an asynchronous request ends, field for field.

The developer guide's "Check prediction results" shows the message: ``awsRegion``, ``eventTime``,
``receivedTime``, ``invocationStatus`` ("Completed" or "Failed"), ``requestParameters`` (``accept``,
``contentType``, ``customAttributes``, ``endpointName``, ``inputLocation``), ``responseParameters``
(``contentType`` and ``outputLocation``, or ``failureLocation``), ``failureReason`` on a failure, ``inferenceId``,
``eventVersion`` "1.0", ``eventSource`` "aws:sagemaker", ``eventName`` "InferenceResult"; a message received from a
deployed endpoint (quoted in the OversightML Model Runner's parser, ``aws.osml.model_runner``) has exactly these. With
``IncludeInferenceResponseIn`` the answer rides along when it is at most 128 KB (API reference,
``AsyncInferenceNotificationConfig``); its shape here, ``responseBody`` with ``content`` (base64), ``message`` and
``encoding`` "BASE64", is recalled from the guide, not confirmed against a deployed endpoint.
"""
from __future__ import annotations

import base64
import datetime
from typing import Any, Optional

from local_endpoint.asynchronous.request import AsyncRequest

RESPONSE_IN_NOTIFICATION_MAX = 128 * 1024


def timestamp(moment: datetime.datetime) -> str:
    """``2022-01-25T22:46:00.608Z``: UTC, milliseconds."""
    utc = moment.astimezone(datetime.timezone.utc)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"


def message(*, region: str, endpoint_name: str, request: AsyncRequest, content_type: str, location_key: str,
            location: str, failure_reason: Optional[str] = None, body: Optional[bytes] = None) -> dict[str, Any]:
    """One notification. ``location_key``: "outputLocation" or "failureLocation"; ``body``: the answer, included
    when the endpoint asks for it (``include_response_in_notifications``) and it is small enough."""
    request_parameters = {"accept": request.accept, "contentType": request.content_type,
                          "customAttributes": request.custom_attributes, "endpointName": endpoint_name,
                          "inputLocation": request.input_location}
    out: dict[str, Any] = {
        "awsRegion": region,
        "eventTime": timestamp(datetime.datetime.now(datetime.timezone.utc)),
        "receivedTime": timestamp(request.received),
        "invocationStatus": "Failed" if failure_reason is not None else "Completed",
        **({"failureReason": failure_reason} if failure_reason is not None else {}),
        "requestParameters": {key: value for key, value in request_parameters.items() if value is not None},
        "responseParameters": {"contentType": content_type, location_key: location},
        "inferenceId": request.inference_id,
        "eventVersion": "1.0",
        "eventSource": "aws:sagemaker",
        "eventName": "InferenceResult",
    }
    if body is not None and len(body) <= RESPONSE_IN_NOTIFICATION_MAX:
        out["responseBody"] = {"content": base64.b64encode(body).decode(), "message": "", "encoding": "BASE64"}
    return out
