"""CloudFormation custom resource: hands a variant's auto-scaling over around an instance-type change.

Runs in AWS Lambda (Python runtime, boto3 included); synth never imports it.

SageMaker fails an UpdateEndpoint that changes the instance type of a variant registered with
Application Auto Scaling, until the variant is deregistered; after the update it may be registered
again (https://docs.aws.amazon.com/sagemaker/latest/dg/endpoint-scaling-update.html). CloudFormation
cannot do that in one stack update, so the stack holds two of these resources, both carrying the
desired instance type and the scaling definition of the stack's own ScalableTarget and policies:

* ``before`` (the endpoint depends on it) and ``after`` (it depends on the endpoint, the scalable
  target on it). Their properties change only when the desired instance type or the scaling
  definition changes, so an ordinary update never calls them.
* Each call does the same sync: if the variant runs another instance type than desired and is
  registered, deregister it (an update that changes the type follows); if it runs the desired type
  and is not registered, register it with the definition and put its policies back (under the
  policy names CloudFormation knows, so the stack's own resources match again).

* ``before`` also deregisters the endpoint's targets whose variant the new configuration lacks (``Variants``,
  every variant name of it, the shadow's too): SageMaker refuses to remove a variant that is a scaling target
  (the same page), and CloudFormation deletes the removed variant's scalable target only after the endpoint
  update. Properties written before ``Variants`` existed skip this.

Forward: ``before`` deregisters, the endpoint moves to the new type, ``after`` registers. A
rollback runs the same calls in reverse with the old properties, which restores the old
registration whichever step failed. Create and Delete do nothing: the stack's ScalableTarget and
ScalingPolicy resources register and deregister as usual.
"""
from __future__ import annotations

import json
import logging
from typing import Any

import boto3
from botocore.exceptions import ClientError
from cfn_response import respond

LOG = logging.getLogger()
LOG.setLevel(logging.INFO)
NAMESPACE, DIMENSION = "sagemaker", "sagemaker:variant:DesiredInstanceCount"
_INTS = ("ScaleInCooldown", "ScaleOutCooldown")


def handler(event: dict[str, Any], context: Any, sagemaker: Any = None, autoscaling: Any = None) -> None:
    props = event["ResourceProperties"]
    physical_id = f"{props['ResourceId']}#{props['Phase']}"
    status = "SUCCESS"
    try:
        kind = event["RequestType"]
        if kind in ("Create", "Update") and props["Phase"] == "before" and "Variants" in props:
            autoscaling = autoscaling or boto3.client("application-autoscaling")
            left = deregister_leaving(autoscaling, props)
        else:
            left = []
        renamed = (props["ResourceId"] != event.get("OldResourceProperties", {}).get("ResourceId", props["ResourceId"]))
        if kind == "Update" and renamed and props["Phase"] == "after":
            # The variant got another name (ResourceId is the target's create-only identifier): CloudFormation
            # creates its replacement ScalableTarget after this and fails with AlreadyExists on a target this
            # registered (CloudFormation CLI contract tests, contract_create_create); registering is its job.
            reason = "; ".join(left + [f"nothing to do: {props['ResourceId']} is a renamed variant, registered by "
                                       "its new ScalableTarget"])
        elif kind == "Update":
            reason = "; ".join(left + [sync(sagemaker or boto3.client("sagemaker"),
                                            autoscaling or boto3.client("application-autoscaling"), props)])
        elif left:  # a new variant's handover: registering is its own ScalableTarget's job
            reason = "; ".join(left)
        else:
            reason = "nothing to do: the stack's ScalableTarget and ScalingPolicy resources (de)register"
    except Exception as exc:  # any failure must reach CloudFormation, or it waits for the timeout
        LOG.exception("scaling handover failed")
        status, reason = "FAILED", f"{type(exc).__name__}: {exc}"[:900]
    LOG.info("%s: %s", physical_id, reason)
    respond(event, status, reason, physical_id)


def sync(sagemaker: Any, autoscaling: Any, props: dict[str, Any]) -> str:
    resource_id, desired = props["ResourceId"], props["InstanceType"]
    running = running_instance_type(sagemaker, props["EndpointName"], props["VariantName"])
    registered = is_registered(autoscaling, resource_id)
    if running is not None and running != desired and registered:
        autoscaling.deregister_scalable_target(ServiceNamespace=NAMESPACE, ResourceId=resource_id,
                                               ScalableDimension=DIMENSION)
        return f"deregistered {resource_id} (runs {running}, moving to {desired}); its policies went with it"
    if running == desired and not registered:
        register(autoscaling, resource_id, props)
        return f"registered {resource_id} again on {desired} with {len(json.loads(props['Policies']))} policies"
    return f"no change: {resource_id} runs {running}, desired {desired}, registered {registered}"


def deregister_leaving(autoscaling: Any, props: dict[str, Any]) -> list[str]:
    """Deregisters the endpoint's scaling targets whose variant is not in ``Variants`` (the new configuration's)."""
    if "Variants" not in props:
        return []
    keep = set(props["Variants"].split(","))
    prefix = f"endpoint/{props['EndpointName']}/variant/"
    out, token = [], None
    while True:
        found = autoscaling.describe_scalable_targets(ServiceNamespace=NAMESPACE, ScalableDimension=DIMENSION,
                                                      **({"NextToken": token} if token else {}))
        for target in found["ScalableTargets"]:
            resource_id = target["ResourceId"]
            if resource_id.startswith(prefix) and resource_id[len(prefix):] not in keep:
                try:
                    autoscaling.deregister_scalable_target(ServiceNamespace=NAMESPACE, ResourceId=resource_id,
                                                           ScalableDimension=DIMENSION)
                except ClientError as exc:  # another variant's handover got there first
                    if exc.response.get("Error", {}).get("Code") != "ObjectNotFoundException":
                        raise
                out.append(f"deregistered {resource_id}: the new configuration has no such variant")
        token = found.get("NextToken")
        if not token:
            return out


def running_instance_type(sagemaker: Any, endpoint: str, variant: str) -> str | None:
    """The instance type the variant runs now, or None when the endpoint or variant does not exist."""
    try:
        described = sagemaker.describe_endpoint(EndpointName=endpoint)
    except ClientError as exc:
        if "Could not find endpoint" in str(exc):
            return None
        raise
    config = sagemaker.describe_endpoint_config(EndpointConfigName=described["EndpointConfigName"])
    # A shadow variant scales like a production one (ResourceId endpoint/<name>/variant/<shadow>).
    variants = config["ProductionVariants"] + config.get("ShadowProductionVariants", [])
    found = next((v for v in variants if v["VariantName"] == variant), None)
    if found is None:
        return None
    # With instance pools the variant has no InstanceType; the pools, by priority, name what it runs on.
    pools = sorted(found.get("InstancePools", []), key=lambda pool: pool["Priority"])
    return found.get("InstanceType") or ",".join(pool["InstanceType"] for pool in pools) or None


def is_registered(autoscaling: Any, resource_id: str) -> bool:
    found = autoscaling.describe_scalable_targets(ServiceNamespace=NAMESPACE, ResourceIds=[resource_id],
                                                  ScalableDimension=DIMENSION)
    return bool(found["ScalableTargets"])


def register(autoscaling: Any, resource_id: str, props: dict[str, Any]) -> None:
    autoscaling.register_scalable_target(ServiceNamespace=NAMESPACE, ResourceId=resource_id,
                                         ScalableDimension=DIMENSION, MinCapacity=int(props["MinCapacity"]),
                                         MaxCapacity=int(props["MaxCapacity"]))
    for policy in json.loads(props["Policies"]):
        autoscaling.put_scaling_policy(PolicyName=policy["PolicyName"], ServiceNamespace=NAMESPACE,
                                       ResourceId=resource_id, ScalableDimension=DIMENSION,
                                       PolicyType="TargetTrackingScaling",
                                       TargetTrackingScalingPolicyConfiguration=api_shape(policy["Configuration"]))
    # Deregistering deleted the target's scheduled actions with it (stacks before they existed have none).
    for action in json.loads(props.get("ScheduledActions", "[]")):
        autoscaling.put_scheduled_action(**scheduled_action(action, resource_id))


def scheduled_action(action: dict[str, Any], resource_id: str) -> dict[str, Any]:
    """PutScheduledAction's arguments for one of the template's ScalableTarget ScheduledActions."""
    bounds = {key: int(value) for key, value in action.get("ScalableTargetAction", {}).items()}
    out = {"ServiceNamespace": NAMESPACE, "ResourceId": resource_id, "ScalableDimension": DIMENSION,
           "ScheduledActionName": action["ScheduledActionName"], "Schedule": action["Schedule"],
           "ScalableTargetAction": bounds}
    if "Timezone" in action:
        out["Timezone"] = action["Timezone"]
    return out


def api_shape(configuration: dict[str, Any]) -> dict[str, Any]:
    """The template's TargetTrackingScalingPolicyConfiguration with the API's number types."""
    out = dict(configuration)
    out["TargetValue"] = float(out["TargetValue"])
    for key in _INTS:
        if key in out:
            out[key] = int(out[key])
    return out

