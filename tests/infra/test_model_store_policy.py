"""The model bucket's policy: only the deployment's copy functions write under models/, nobody deletes there (but
CDK's auto-delete provider in a throw-away stage), data capture and async prefixes untouched.

How it is checked: by evaluation, not by shape. There is no IAM policy engine offline, so this module holds a
small evaluator for the statement shapes the synthesized bucket policies use (Effect, Principal ``*`` / AWS ARNs /
a service, Action and Resource with ``*`` and ``?``, and the condition operators Bool, Null, String(Not)Equals,
String(Not)Like, Arn(Not)Equals, Arn(Not)Like); anything else (NotPrincipal, NotAction, NotResource, another
operator, an unknown intrinsic) raises instead of guessing. Its rules are IAM's, as the IAM User Guide states them:
- condition operators (reference_policies_elements_condition_operators.html): a key missing from the request
  fails a matching operator and passes a negated one (StringNotLike, ArnNotLike); Null tests presence; ArnLike
  matches each of the six colon-delimited ARN parts on its own;
- several operators, or several keys in one, must all hold; several values of one key are alternatives, and for a
  negated operator none may match (reference_policies_multi-value-conditions.html);
- an explicit Deny in any policy wins over every Allow (reference_policies_evaluation-logic.html), so "denied"
  here is final, and "not denied" means the identity policy decides (the copy role's grants it).
Requests are planted writers: the role a copy function really gets (its path from the endpoint stack's template),
other roles, the root user, a service, a replication role.
"""
from __future__ import annotations

import copy
import dataclasses
import json
import re
from typing import Any, Optional

from boto3.s3.transfer import TransferManager

from synth_helpers import ROOT
from triton_constructs.model_store import MODEL_WRITERS_PATH

ACCOUNT = "111122223333"
# The condition keys S3 puts on an object write (S3 user guide, "Enforce conditional writes on Amazon S3 buckets"):
# the request that creates the object (PutObject, CopyObject, CompleteMultipartUpload), one of the multipart steps
# before it, and the If-None-Match header.
CREATES = ("s3:ObjectCreationOperation", "true")
PART = ("s3:ObjectCreationOperation", "false")
IF_NONE_MATCH = ("s3:if-none-match", "*")


# --- the evaluator ---------------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Request:
    """One S3 request as a bucket policy sees it: who (a principal's ARN, or a service), what, on which ARN."""

    action: str
    resource: str
    principal: Optional[str] = None  # aws:PrincipalArn; None for an AWS service principal or an anonymous caller
    service: Optional[str] = None
    context: tuple[tuple[str, str], ...] = ()  # further condition keys, e.g. ("s3:if-none-match", "*")

    def keys(self) -> dict[str, str]:
        keys = {"aws:SecureTransport": "true", **dict(self.context)}
        if self.principal is not None:
            keys["aws:PrincipalArn"] = self.principal
        return keys


def _glob(pattern: str, value: str, *, case: bool = True) -> bool:
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, value, 0 if case else re.IGNORECASE) is not None


def _arn_like(pattern: str, value: str) -> bool:
    """ArnLike: the six colon-delimited parts matched one by one (a wildcard never spans a colon)."""
    parts, values = pattern.split(":", 5), value.split(":", 5)
    return len(parts) == len(values) == 6 and all(_glob(p, v) for p, v in zip(parts, values))


_MATCH = {"StringEquals": lambda p, v: p == v, "StringLike": _glob, "ArnEquals": lambda p, v: p == v,
          "ArnLike": _arn_like, "Bool": lambda p, v: p.lower() == v.lower()}
_NEGATED = {"StringNotEquals": "StringEquals", "StringNotLike": "StringLike", "ArnNotEquals": "ArnEquals",
            "ArnNotLike": "ArnLike"}


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _condition_holds(condition: dict[str, dict[str, Any]], keys: dict[str, str]) -> bool:
    for operator, tests in condition.items():
        for key, wanted in tests.items():
            values = [str(v) for v in _listed(wanted)]
            if operator == "Null":
                # "true": the key must be absent; "false": present.
                if any((key not in keys) != (v.lower() == "true") for v in values):
                    return False
            elif operator in _NEGATED:
                if key in keys and any(_MATCH[_NEGATED[operator]](v, keys[key]) for v in values):
                    return False
            elif operator in _MATCH:
                if key not in keys or not any(_MATCH[operator](v, keys[key]) for v in values):
                    return False
            else:
                raise NotImplementedError(f"condition operator {operator} is not modelled here")
    return True


def _principal_matches(principal: Any, request: Request) -> bool:
    if principal == "*":
        return True
    for kind, values in principal.items():
        for value in _listed(values):
            if kind == "AWS" and (value == "*" or value == request.principal):
                return True
            if kind == "Service" and value == request.service:
                return True
            if kind not in ("AWS", "Service"):
                raise NotImplementedError(f"principal kind {kind} is not modelled here")
    return False


def _applies(statement: dict[str, Any], request: Request) -> bool:
    unsupported = {"NotPrincipal", "NotAction", "NotResource"} & set(statement)
    if unsupported:
        raise NotImplementedError(f"{sorted(unsupported)} are not modelled here")
    return (_principal_matches(statement["Principal"], request)
            and any(_glob(a, request.action, case=False) for a in _listed(statement["Action"]))
            and any(_arn_like(r, request.resource) for r in _listed(statement["Resource"]))
            and _condition_holds(statement.get("Condition", {}), request.keys()))


def decide(statements: list[dict[str, Any]], request: Request) -> str:
    """"denied" (an explicit Deny applies: final), "allowed" (an Allow applies, no Deny) or "not denied" (neither:
    the principal's own policies decide)."""
    effects = {s["Effect"] for s in statements if _applies(s, request)}
    return "denied" if "Deny" in effects else "allowed" if "Allow" in effects else "not denied"


def resolve(value: Any, resources: dict[str, Any], partition: str) -> Any:
    """The policy with its CloudFormation intrinsics replaced by what they stand for at deploy time."""
    if isinstance(value, list):
        return [resolve(v, resources, partition) for v in value]
    if not isinstance(value, dict):
        return value
    if set(value) == {"Ref"} and value["Ref"] in ("AWS::Partition", "AWS::AccountId", "AWS::URLSuffix"):
        return {"AWS::Partition": partition, "AWS::AccountId": ACCOUNT, "AWS::URLSuffix": "amazonaws.com"}[value["Ref"]]
    if set(value) == {"Fn::Join"}:
        separator, parts = value["Fn::Join"]
        return separator.join(resolve(parts, resources, partition))
    if set(value) == {"Fn::GetAtt"} and value["Fn::GetAtt"][1] == "Arn":
        logical_id = value["Fn::GetAtt"][0]
        kind = resources[logical_id]["Type"]
        if kind == "AWS::S3::Bucket":
            return f"arn:{partition}:s3:::{logical_id.lower()}"
        if kind in ("AWS::IAM::Role", "AWS::CloudFormation::CustomResource") or kind.startswith("Custom::"):
            return f"arn:{partition}:iam::{ACCOUNT}:role/{logical_id}"
    if any(k.startswith(("Fn::", "Ref")) for k in value):
        raise NotImplementedError(f"intrinsic {json.dumps(value)} is not modelled here")
    return {k: resolve(v, resources, partition) for k, v in value.items()}


# --- the synthesized policies and copy roles ---------------------------------------------------------------------------

def _model_bucket_policy(template: dict[str, Any], partition: str) -> tuple[str, list[dict[str, Any]]]:
    """The KMS-encrypted (model) bucket's ARN and its policy's statements, resolved."""
    resources = template["Resources"]
    bucket_id, = [k for k, r in resources.items() if r["Type"] == "AWS::S3::Bucket" and "aws:kms" in json.dumps(
        r["Properties"].get("BucketEncryption", {}))]
    policy, = [r for r in resources.values() if r["Type"] == "AWS::S3::BucketPolicy"
               and r["Properties"]["Bucket"] == {"Ref": bucket_id}]
    return (f"arn:{partition}:s3:::{bucket_id.lower()}",
            resolve(policy["Properties"]["PolicyDocument"]["Statement"], resources, partition))


def _model_writer_roles(template: dict[str, Any], partition: str) -> dict[str, str]:
    """The ARN each role would have (its path, its logical ID as name) whose policy lets it write under models/."""
    resources = template["Resources"]
    roles = {}
    for policy in (r for r in resources.values() if r["Type"] == "AWS::IAM::Policy"):
        writes = [s for s in policy["Properties"]["PolicyDocument"]["Statement"] if s["Effect"] == "Allow"
                  and "s3:PutObject" in _listed(s["Action"]) and "/models/" in json.dumps(s["Resource"])]
        for ref in policy["Properties"]["Roles"] if writes else []:
            path = resources[ref["Ref"]]["Properties"].get("Path", "/")
            roles[ref["Ref"]] = f"arn:{partition}:iam::{ACCOUNT}:role{path}{ref['Ref']}"
    return roles


def _auto_delete_role(template: dict[str, Any], partition: str) -> Optional[str]:
    ids = [k for k, r in template["Resources"].items()
           if k.startswith("CustomS3AutoDeleteObjectsCustomResourceProviderRole")]
    return f"arn:{partition}:iam::{ACCOUNT}:role/{ids[0]}" if ids else None


def model_store_findings(bucket: str, statements: list[dict[str, Any]], *, deletable: bool,
                         writers: dict[str, str], auto_delete: Optional[str]) -> list[str]:
    """What the policy gets wrong against the planted writers: one line per request decided otherwise than the
    model store promises. ``writers``: the copy roles (by construct ID), which must stay able to write."""
    other = f"arn:{bucket.split(':')[1]}:iam::{ACCOUNT}:role/Admin"
    model = f"{bucket}/models/classifier/resnet50-0123456789ab.tar.gz"
    cases: list[tuple[str, Request, set[str]]] = [
        ("another role's PutObject under models/", Request("s3:PutObject", model, other), {"denied"}),
        ("another role's PutObject with If-None-Match under models/", Request(
            "s3:PutObject", model, other, context=(CREATES, IF_NONE_MATCH)), {"denied"}),
        ("another role's UploadPart under models/", Request("s3:PutObject", model, other, context=(PART,)),
         {"denied"}),
        ("another role's DeleteObject under models/", Request("s3:DeleteObject", model, other),
         {"not denied"} if deletable else {"denied"}),
        ("another role's DeleteObjectVersion under models/", Request("s3:DeleteObjectVersion", model, other),
         {"not denied"} if deletable else {"denied"}),
        ("a role under a look-alike path's PutObject", Request("s3:PutObject", model, other.replace(
            "role/Admin", "role/tritonsm/model-writers-x/Admin")), {"denied"}),
        ("a user under the writers' path's PutObject", Request("s3:PutObject", model, other.replace(
            "role/Admin", f"user{MODEL_WRITERS_PATH}alice")), {"denied"}),
        ("another account's role under the writers' path's PutObject", Request("s3:PutObject", model, other.replace(
            ACCOUNT, "444455556666").replace("role/Admin", f"role{MODEL_WRITERS_PATH}Copy")), {"denied"}),
        ("the root user's PutObject under models/", Request("s3:PutObject", model, other.replace(
            "role/Admin", "root")), {"denied"}),
        ("a service principal's PutObject under models/", Request("s3:PutObject", model,
                                                                  service="sagemaker.amazonaws.com"), {"denied"}),
        ("a replication role's ReplicateObject under models/", Request("s3:ReplicateObject", model, other),
         {"denied"}),
        ("another role's PutObject under data-capture/", Request(
            "s3:PutObject", f"{bucket}/data-capture/classifier/AllTraffic/x.jsonl", other), {"not denied"}),
        ("another role's PutObject under async/", Request("s3:PutObject", f"{bucket}/async/classifier/input/r.json",
                                                          other), {"not denied"}),
        ("another role's DeleteObject under data-capture/", Request(
            "s3:DeleteObject", f"{bucket}/data-capture/classifier/AllTraffic/x.jsonl", other), {"not denied"}),
    ]
    for name, role in writers.items():
        cases += [
            (f"copy role {name}'s UploadPartCopy under models/", Request("s3:PutObject", model, role, context=(
                PART,)), {"not denied"}),
            (f"copy role {name}'s CompleteMultipartUpload with If-None-Match under models/", Request(
                "s3:PutObject", model, role, context=(CREATES, IF_NONE_MATCH)), {"not denied"}),
            (f"copy role {name}'s CopyObject or PutObject without If-None-Match (an overwrite) under models/",
             Request("s3:PutObject", model, role, context=(CREATES,)), {"denied"}),
            (f"copy role {name}'s PutObject without TLS", Request("s3:PutObject", model, role,
                                                                  context=(("aws:SecureTransport", "false"),)),
             {"denied"}),
            (f"copy role {name}'s DeleteObjectVersion under models/", Request("s3:DeleteObjectVersion", model, role),
             {"not denied"} if deletable else {"denied"}),
        ]
    if deletable:
        if auto_delete is None:
            return ["a deletable store without CDK's auto-delete provider role"]
        cases.append(("the auto-delete provider's DeleteObjectVersion under models/",
                      Request("s3:DeleteObjectVersion", model, auto_delete), {"allowed"}))
    findings = []
    for description, request, expected in cases:
        got = decide(statements, request)
        if got not in expected:
            findings.append(f"{description}: {got}, expected {' or '.join(sorted(expected))}")
    return findings


def _stage_findings(synth: Any, environment: str) -> list[str]:
    """``synth``: a Synth (in memory) or an Assembly (read from disk)."""
    def template(name: str = "Storage") -> dict[str, Any]:
        found = synth.template(environment, name)
        return found if isinstance(found, dict) else found.to_json()

    env = synth.spec.environments[environment]
    partition = "aws-cn" if (env.region or "").startswith("cn-") else "aws"
    storage = template()
    bucket, statements = _model_bucket_policy(storage, partition)
    writers: dict[str, str] = {}
    for endpoint in env.endpoints:
        writers.update({f"{endpoint}/{k}": v for k, v in _model_writer_roles(
            template(endpoint), partition).items()})
    deletable = any(r["Type"] == "Custom::S3AutoDeleteObjects" for r in storage["Resources"].values())
    return [f"{environment}: {line}" for line in model_store_findings(
        bucket, statements, deletable=deletable, writers=writers, auto_delete=_auto_delete_role(storage, partition))]


# --- tests -----------------------------------------------------------------------------------------------------------

def test_every_stage_model_store_admits_only_its_copy_roles(every_assembly):
    findings = {name: [line for env in assembly.spec.environments for line in _stage_findings(assembly, env)]
                for name, assembly in every_assembly.items()}
    assert {name: lines for name, lines in findings.items() if lines} == {}
    # The guard saw copy roles to admit, and both kinds of stage (retained and throw-away).
    default = every_assembly["triton.yaml"]
    assert _model_writer_roles(default.template("prod", "classifier"), "aws")
    assert {any(r["Type"] == "Custom::S3AutoDeleteObjects" for r in default.template(e)["Resources"].values())
            for e in default.spec.environments} == {True, False}


def test_a_policy_without_the_write_deny_is_reported(default_synth):
    storage = default_synth.template("prod").to_json()
    bucket, statements = _model_bucket_policy(storage, "aws")
    planted = [s for s in statements if s.get("Sid") != "ModelsWrittenOnlyByTheDeployment"]
    writers = _model_writer_roles(default_synth.template("prod", "classifier").to_json(), "aws")
    assert model_store_findings(bucket, planted, deletable=False, writers=writers, auto_delete=None) == [
        "another role's PutObject under models/: not denied, expected denied",
        "another role's PutObject with If-None-Match under models/: not denied, expected denied",
        "another role's UploadPart under models/: not denied, expected denied",
        "a role under a look-alike path's PutObject: not denied, expected denied",
        "a user under the writers' path's PutObject: not denied, expected denied",
        "another account's role under the writers' path's PutObject: not denied, expected denied",
        "the root user's PutObject under models/: not denied, expected denied",
        "a service principal's PutObject under models/: not denied, expected denied",
        "a replication role's ReplicateObject under models/: not denied, expected denied",
    ]


def test_a_policy_without_the_delete_deny_or_with_a_loose_writer_pattern_is_reported(default_synth):
    storage = default_synth.template("prod").to_json()
    bucket, statements = _model_bucket_policy(storage, "aws")
    writers = _model_writer_roles(default_synth.template("prod", "classifier").to_json(), "aws")
    no_delete_deny = [s for s in statements if s.get("Sid") != "ModelsNeverDeleted"]
    name, = writers
    assert model_store_findings(bucket, no_delete_deny, deletable=False, writers=writers, auto_delete=None) == [
        "another role's DeleteObject under models/: not denied, expected denied",
        "another role's DeleteObjectVersion under models/: not denied, expected denied",
        f"copy role {name}'s DeleteObjectVersion under models/: not denied, expected denied",
    ]
    # Any role of any account: the path check gone, the wrong writers pass.
    loose = copy.deepcopy(statements)
    for statement in loose:
        if statement.get("Sid") == "ModelsWrittenOnlyByTheDeployment":
            statement["Condition"] = {"ArnNotLike": {"aws:PrincipalArn": "arn:aws:iam::*:role/*"}}
    assert model_store_findings(bucket, loose, deletable=False, writers=writers, auto_delete=None) == [
        "another role's PutObject under models/: not denied, expected denied",
        "another role's PutObject with If-None-Match under models/: not denied, expected denied",
        "another role's UploadPart under models/: not denied, expected denied",
        "a role under a look-alike path's PutObject: not denied, expected denied",
        "another account's role under the writers' path's PutObject: not denied, expected denied",
        "a replication role's ReplicateObject under models/: not denied, expected denied",
    ]


def test_a_copy_role_without_the_writers_path_is_reported(default_synth):
    storage = default_synth.template("prod").to_json()
    bucket, statements = _model_bucket_policy(storage, "aws")
    endpoint = copy.deepcopy(default_synth.template("prod", "classifier").to_json())
    for resource in endpoint["Resources"].values():
        if resource["Type"] == "AWS::IAM::Role":
            resource["Properties"].pop("Path", None)
    writers = _model_writer_roles(endpoint, "aws")
    name, = writers
    assert model_store_findings(bucket, statements, deletable=False, writers=writers, auto_delete=None) == [
        f"copy role {name}'s UploadPartCopy under models/: denied, expected not denied",
        f"copy role {name}'s CompleteMultipartUpload with If-None-Match under models/: denied, expected not denied"]


def test_the_copy_role_sits_under_the_writers_path_and_the_deny_names_it(default_synth):
    endpoint = default_synth.template("prod", "classifier").to_json()["Resources"]
    paths = {k: r["Properties"].get("Path") for k, r in endpoint.items() if r["Type"] == "AWS::IAM::Role"}
    assert [k for k, p in paths.items() if p == MODEL_WRITERS_PATH] == list(_model_writer_roles(
        {"Resources": endpoint}, "aws"))
    _, statements = _model_bucket_policy(default_synth.template("prod").to_json(), "aws")
    deny, = [s for s in statements if s.get("Sid") == "ModelsWrittenOnlyByTheDeployment"]
    assert deny["Condition"] == {"ArnNotLike": {"aws:PrincipalArn": f"arn:aws:iam::{ACCOUNT}:role/tritonsm/model-writers/*"}}


def test_an_overwrite_is_denied_to_every_writer_but_a_conditional_completion_is_not(default_synth):
    _, statements = _model_bucket_policy(default_synth.template("prod").to_json(), "aws")
    deny, = [s for s in statements if s.get("Sid") == "ModelsNeverOverwritten"]
    assert (deny["Action"], deny["Condition"]) == ("s3:PutObject", {
        "Null": {"s3:if-none-match": "true"}, "Bool": {"s3:ObjectCreationOperation": "true"}})
    # The copy function sends If-None-Match itself; boto3's managed copy, which cannot, is not what it uses.
    assert "IfNoneMatch" not in TransferManager.ALLOWED_COPY_ARGS
    handler = (ROOT / "triton_constructs" / "handlers" / "copy_artifact.py").read_text()
    assert "s3.copy(" not in handler and "copy_object(" not in handler


def test_a_policy_without_the_overwrite_deny_is_reported(default_synth):
    storage = default_synth.template("prod").to_json()
    bucket, statements = _model_bucket_policy(storage, "aws")
    writers = _model_writer_roles(default_synth.template("prod", "classifier").to_json(), "aws")
    kept = [s for s in statements if s.get("Sid") != "ModelsNeverOverwritten"]
    findings = model_store_findings(bucket, kept, deletable=False, writers=writers, auto_delete=None)
    assert findings == [f"copy role {name}'s CopyObject or PutObject without If-None-Match (an overwrite) under "
                        "models/: not denied, expected denied" for name in writers]


def test_the_evaluator_follows_iams_rules_for_missing_keys_and_arn_parts():
    statement = {"Effect": "Deny", "Principal": {"AWS": "*"}, "Action": "s3:PutObject", "Resource": "arn:aws:s3:::b/*",
                 "Condition": {"ArnNotLike": {"aws:PrincipalArn": "arn:aws:iam::1:role/p/*"}}}
    # A negated operator holds where the key is missing (a service principal): denied.
    assert decide([statement], Request("s3:PutObject", "arn:aws:s3:::b/k", service="s3.amazonaws.com")) == "denied"
    assert decide([statement], Request("s3:PutObject", "arn:aws:s3:::b/k", "arn:aws:iam::1:role/p/x")) == "not denied"
    # Actions match without regard to case; a wildcard in ArnLike does not span a colon.
    assert decide([statement], Request("S3:putobject", "arn:aws:s3:::b/k", "arn:aws:iam::1:role/q")) == "denied"
    assert not _arn_like("arn:aws:iam::*:role/p/*", "arn:aws:iam::1:2:role/p/x")
    # Null "true": the key must be absent; several values of a negated operator: none may match.
    assert _condition_holds({"Null": {"s3:if-none-match": "true"}}, {})
    assert not _condition_holds({"Null": {"s3:if-none-match": "true"}}, {"s3:if-none-match": "*"})
    assert not _condition_holds({"StringNotLike": {"k": ["a*", "b*"]}}, {"k": "bc"})
    # What it does not model, it refuses.
    try:
        decide([{**statement, "Condition": {"IpAddress": {"aws:SourceIp": "10.0.0.0/8"}}}],
               Request("s3:PutObject", "arn:aws:s3:::b/k", "arn:aws:iam::1:role/q"))
    except NotImplementedError as error:
        assert str(error) == "condition operator IpAddress is not modelled here"
    else:
        raise AssertionError("an unmodelled operator was evaluated")
