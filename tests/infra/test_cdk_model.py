"""The SageMaker model: mode, model data, container environment, VPC, and its least-privilege role."""
import json

from aws_cdk.assertions import Capture, Match

from synth_helpers import ROOT, resource_id, statements, synth_spec


def test_multi_model_endpoint_reads_a_prefix(default_synth):
    template = default_synth.template("dev", "vision-nlp")
    url = Capture()
    # MultiModel mode, model cache on by default, model data = the endpoint's prefix.
    template.has_resource_properties("AWS::SageMaker::Model", {"PrimaryContainer": {
        "Mode": "MultiModel", "ModelDataUrl": url, "MultiModelConfig": {"ModelCacheSetting": "Enabled"},
        "Image": "763104351884.dkr.ecr.us-east-1.amazonaws.com/sagemaker-tritonserver:25.09-py3",
        "Environment": Match.any_value()}})
    assert url.as_object() == {"Fn::Join": ["", [
        "s3://", {"Fn::ImportValue": "Triton-dev-Storage-BucketName"}, "/models/vision-nlp/"]]}


def test_single_model_endpoint_reads_its_content_versioned_tarball(default_synth):
    template = default_synth.template("dev", "classifier")
    url = Capture()
    template.has_resource_properties("AWS::SageMaker::Model", {"PrimaryContainer": {
        "Mode": "SingleModel", "ModelDataUrl": url, "MultiModelConfig": Match.absent(),
        "Environment": Match.any_value(), "Image": Match.any_value()}})
    artifact = json.loads(default_synth.manifest_path.read_text())["endpoints"]["classifier"]["artifacts"][0]
    # The object name carries the first 12 hex digits of the tarball's sha256.
    assert url.as_object()["Fn::Join"][1][2] == f"/models/classifier/{artifact['file']}"
    assert artifact["file"].endswith(f"-{artifact['sha256'][:12]}.tar.gz")


# Triton's metrics, on by default at a port in SageMaker's safe range (deployment_spec.facts.triton_metrics).
METRICS = {"SAGEMAKER_TRITON_ALLOW_METRICS": "true", "SAGEMAKER_TRITON_METRICS_PORT": "23000"}


def test_ensemble_endpoint_names_its_default_model_and_shm(default_synth):
    env = Capture()
    default_synth.template("prod", "classifier").has_resource_properties(
        "AWS::SageMaker::Model", {"PrimaryContainer": Match.object_like({"Environment": env})})
    # Several model directories (ensemble + steps): the ensemble answers /invocations; the Python
    # backend gets the spec's shared memory; no verbose logs in prod; ping mode exported (the Triton server's docker/sagemaker/serve script, r25.09).
    assert env.as_object() == {
        **METRICS,
        "SAGEMAKER_TRITON_DEFAULT_MODEL_NAME": "text-classifier",
        "SAGEMAKER_TRITON_LOG_VERBOSE": "false",
        "SAGEMAKER_TRITON_PING_MODE": "ready",
        "SAGEMAKER_TRITON_SHM_DEFAULT_BYTE_SIZE": "67108864",
        "SAGEMAKER_TRITON_SHM_GROWTH_BYTE_SIZE": "8388608",
    }


def test_verbose_logging_only_in_the_throw_away_environment(default_synth):
    for environment, expected in (("dev", "true"), ("staging", "false"), ("prod", "false")):
        env = Capture()
        default_synth.template(environment, "vision-nlp").has_resource_properties(
            "AWS::SageMaker::Model", {"PrimaryContainer": Match.object_like({"Environment": env})})
        # MME: live ping, no default model; verbose logs where removal_policy is destroy.
        assert env.as_object() == {**METRICS, "SAGEMAKER_TRITON_LOG_VERBOSE": expected,
                                   "SAGEMAKER_TRITON_PING_MODE": "live"}


def test_container_settings_from_the_spec(variety_synth):
    env = Capture()
    variety_synth.template("dev", "cpu").has_resource_properties(
        "AWS::SageMaker::Model", {"PrimaryContainer": Match.object_like({"Environment": env})})
    # Explicit log_verbose wins over the environment default; thread count is passed through.
    assert env.as_object() == {**METRICS, "SAGEMAKER_TRITON_LOG_VERBOSE": "true", "SAGEMAKER_TRITON_PING_MODE": "ready",
                               "SAGEMAKER_TRITON_THREAD_COUNT": "16"}
    env = Capture()
    variety_synth.template("dev", "embeddings").has_resource_properties(
        "AWS::SageMaker::Model", {"PrimaryContainer": Match.object_like({"Environment": env})})
    # An explicit ping mode is both exported and set as the serve script's override.
    assert env.as_object() == {
        **METRICS, "SAGEMAKER_TRITON_ADDITIONAL_ARGS": "--log-info=true", "SAGEMAKER_TRITON_LOG_VERBOSE": "true",
        "SAGEMAKER_TRITON_OVERRIDE_PING_MODE": "ready", "SAGEMAKER_TRITON_PING_MODE": "ready",
        "SAGEMAKER_TRITON_SHM_DEFAULT_BYTE_SIZE": "33554432"}


def test_vpc_network_isolation_and_model_cache(variety_synth):
    # The spec's subnets and security groups, no network access for the container, no model caching.
    variety_synth.template("dev", "embeddings").has_resource_properties("AWS::SageMaker::Model", {
        "VpcConfig": {"Subnets": ["subnet-0aaa1111", "subnet-0bbb2222"], "SecurityGroupIds": ["sg-0ccc3333"]},
        "EnableNetworkIsolation": True,
        "PrimaryContainer": Match.object_like({"MultiModelConfig": {"ModelCacheSetting": "Disabled"}})})


def test_model_waits_for_its_role_policy_and_artifacts(default_synth):
    template = default_synth.template("prod", "vision-nlp")
    model = template.find_resources("AWS::SageMaker::Model")
    depends = next(iter(model.values()))["DependsOn"]
    role_id = resource_id(template, "AWS::IAM::Role", {"AssumeRolePolicyDocument": Match.object_like({
        "Statement": [Match.object_like({"Principal": {"Service": "sagemaker.amazonaws.com"}})]})})
    policy = template.find_resources("AWS::IAM::Policy", {"Properties": {"Roles": [{"Ref": role_id}]}})
    # CreateModel runs only after the execution role's policy (avoids the IAM race) ...
    assert set(policy) <= set(depends)
    # ... and after every tarball has been copied into place.
    assert set(template.find_resources("Custom::TritonModelArtifact")) <= set(depends)


def test_execution_role_is_least_privilege(default_synth):
    template = default_synth.template("prod", "vision-nlp")
    role_id = resource_id(template, "AWS::IAM::Role", {"AssumeRolePolicyDocument": Match.object_like({
        "Statement": [Match.object_like({"Principal": {"Service": "sagemaker.amazonaws.com"}})]})})
    # No managed policies (no AmazonSageMakerFullAccess).
    template.has_resource_properties("AWS::IAM::Role", {"ManagedPolicyArns": Match.absent(),
                                                        "AssumeRolePolicyDocument": Match.any_value()})
    by_action = {json.dumps(s["Action"]): s for s in statements(template, role_id)}
    # S3: read only, only this endpoint's prefix of the model bucket.
    assert by_action['"s3:GetObject"']["Resource"] == {"Fn::Join": ["", [
        {"Fn::ImportValue": "Triton-prod-Storage-BucketArn"}, "/models/vision-nlp/*"]]}
    # KMS: decrypt with the bucket's key, through S3 only.
    assert by_action['"kms:Decrypt"']["Resource"] == {"Fn::ImportValue": "Triton-prod-Storage-KeyArn"}
    assert "kms:ViaService" in by_action['"kms:Decrypt"']["Condition"]["StringEquals"]
    # ECR: pull only from the Triton repository of the image's account.
    pull = by_action[json.dumps(["ecr:BatchCheckLayerAvailability", "ecr:BatchGetImage",
                                 "ecr:GetDownloadUrlForLayer"])]
    assert pull["Resource"] == "arn:aws:ecr:us-east-1:763104351884:repository/sagemaker-tritonserver"
    # Metrics: only into the endpoint metrics namespace.
    assert by_action['"cloudwatch:PutMetricData"']["Condition"] == {
        "StringEquals": {"cloudwatch:namespace": "/aws/sagemaker/Endpoints"}}
    # Logs: only the endpoint's own log group.
    logs_id = resource_id(template, "AWS::Logs::LogGroup",
                          {"LogGroupName": "/aws/sagemaker/Endpoints/Triton-prod-vision-nlp"})
    # The Logs part of AWS's documented CreateModel role minimum, scoped to this endpoint's log group.
    assert by_action[json.dumps(["logs:CreateLogGroup", "logs:CreateLogStream", "logs:DescribeLogStreams",
                                 "logs:PutLogEvents"])]["Resource"] == {
        "Fn::GetAtt": [logs_id, "Arn"]}
    # The only "*" resources are the two actions without resource-level permissions.
    wildcard = sorted(json.dumps(s["Action"]) for s in statements(template, role_id) if s["Resource"] == "*")
    assert wildcard == ['"cloudwatch:PutMetricData"', '"ecr:GetAuthorizationToken"']


def test_no_s3_or_ecr_statement_has_a_star_resource(default_synth, variety_synth):
    for synth in (default_synth, variety_synth):
        for stack in synth.stacks():
            template = synth.template(*_key(synth, stack))
            for policy in template.find_resources("AWS::IAM::Policy").values():
                for s in policy["Properties"]["PolicyDocument"]["Statement"]:
                    actions = s["Action"] if isinstance(s["Action"], list) else [s["Action"]]
                    if any(a.startswith("s3:") or a in ("ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer")
                           for a in actions):
                        assert s["Resource"] != "*" and "arn:aws:s3:::*" not in json.dumps(s["Resource"]), s


def _key(synth, stack):
    for env in synth.spec.environments:
        if stack is synth.stack(env):
            return env, "Storage"
        for name in synth.spec.environments[env].endpoints:
            if stack is synth.stack(env, name):
                return env, name
    raise KeyError(stack)


def test_data_capture_role_writes_only_its_capture_prefix(variety_synth):
    template = variety_synth.template("dev", "cpu")
    role_id = resource_id(template, "AWS::IAM::Role", {"AssumeRolePolicyDocument": Match.object_like({
        "Statement": [Match.object_like({"Principal": {"Service": "sagemaker.amazonaws.com"}})]})})
    puts = [s for s in statements(template, role_id) if s["Action"] == "s3:PutObject"]
    assert [s["Resource"] for s in puts] == [{"Fn::Join": ["", [
        {"Fn::ImportValue": "Test-dev-Storage-BucketArn"}, "/data-capture/cpu/*"]]}]


def test_vpc_model_gets_network_interface_permissions(variety_synth):
    template = variety_synth.template("dev", "embeddings")
    role_id = resource_id(template, "AWS::IAM::Role", {"AssumeRolePolicyDocument": Match.object_like({
        "Statement": [Match.object_like({"Principal": {"Service": "sagemaker.amazonaws.com"}})]})})
    actions = [a for s in statements(template, role_id) for a in (s["Action"] if isinstance(s["Action"], list)
                                                                   else [s["Action"]])]
    assert "ec2:CreateNetworkInterface" in actions and "ec2:DescribeSubnets" in actions


def test_network_isolation_is_on_unless_the_spec_opts_out_with_a_reason(default_synth, tmp_path):
    for environment in default_synth.spec.environments:
        for name in default_synth.spec.endpoints:
            default_synth.template(environment, name).has_resource_properties(
                "AWS::SageMaker::Model", {"EnableNetworkIsolation": True})
    text = (ROOT / "triton.yaml").read_text().replace(
        "    container: {shm_default_bytes",
        "    network: {isolation: false, isolation_opt_out_reason: model.py calls a feature store}\n"
        "    container: {shm_default_bytes", 1)
    (tmp_path / "triton.yaml").write_text(text)
    opted_out = synth_spec(tmp_path / "triton.yaml", tmp_path)
    opted_out.template("prod", "classifier").has_resource_properties(
        "AWS::SageMaker::Model", {"EnableNetworkIsolation": Match.absent()})
