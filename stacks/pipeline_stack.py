"""The delivery pipeline (CDK Pipelines): source → GPU model build → synth → stages in order.

Deployed once with ``cdk deploy <Project>Pipeline``; afterwards it updates itself from the
repository (self-mutation). Each stage is the same ``TritonStage`` that ``cdk deploy "<Stage>/*"``
deploys by hand, synthesized in the pipeline from the GPU build's manifest.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

import aws_cdk as cdk
from aws_cdk import aws_codebuild as codebuild, aws_ec2 as ec2, aws_iam as iam, pipelines
from constructs import Construct

from deployment_spec import Spec
from deployment_spec.facts import images, triton_images
from deployment_spec.sections.pipeline import BuildComputeKind, PipelineSpec
from .pipeline_commands import (BUILD_COMMANDS, BUILD_OUTPUT, LOAD_OUTPUT, SPEC_VARIABLE, SYNTH_COMMANDS,
                                      post_deploy_commands, verify_commands)
from .stage import TritonStage
from triton_constructs import checks, pipeline_checks
from triton_constructs.errors import SynthError
from triton_constructs.escape_hatch import default_child
from triton_constructs.pipeline_resources import BuildCache, acknowledge_pipeline_findings, log_artifacts

# bootstrap.sh needs Python 3.11; the curated standard image selects it per build
# (https://docs.aws.amazon.com/codebuild/latest/userguide/runtime-versions.html).
IMAGE = codebuild.LinuxBuildImage.STANDARD_7_0
INSTALL = {"runtime-versions": {"python": "3.11"}}
CACHE_DIR = "/root/.cache"          # pip, Hugging Face and $TRITONSM_CACHE_DIR (serving runtimes, environments)
WORK_CACHE = ".tritonsm/build"      # tritonsm build's per-model cache, keyed by input hash: unchanged models skip
# BUILD_GENERAL1_SMALL / _LARGE (deployment_spec.sections.pipeline.ON_DEMAND_GPU says which GPU each has).
COMPUTE_TYPE = {BuildComputeKind.GPU_SMALL: codebuild.ComputeType.SMALL,
                BuildComputeKind.GPU_LARGE: codebuild.ComputeType.LARGE}


class PipelineStack(cdk.Stack):
    """CDK Pipelines for one spec.

    Args:
        scope: The app.
        id_: Construct ID, ``<Project>Pipeline``.
        spec: The deployment spec; ``spec.pipeline`` is set.
        spec_file: The spec's path relative to the repository root (what the pipeline's steps read).
        make_stage: Builds the ``TritonStage`` of one environment under the given scope.
        **kwargs: ``cdk.Stack`` arguments.

    Raises:
        SynthError: a TensorRT model whose endpoint GPU differs from the build compute's, or a smoke-tested
            stage in another account than the pipeline.
    """

    def __init__(self, scope: Construct, id_: str, *, spec: Spec, spec_file: str,
                 make_stage: Callable[[Construct, str], TritonStage], with_stages: bool = True,
                 **kwargs: Any) -> None:
        pipeline_spec = spec.pipeline
        assert pipeline_spec is not None
        PipelineStack.check(spec)
        account, region = pipeline_spec.where(dict(spec.environments))
        super().__init__(scope, id_, description=f"Delivery pipeline of {spec.project} ({spec_file})",
                         env=cdk.Environment(account=account, region=region), **kwargs)
        source = pipelines.CodePipelineSource.connection(
            pipeline_spec.repository, pipeline_spec.branch, connection_arn=pipeline_spec.connection_arn)
        cache = BuildCache(self, "BuildCache")
        env = {SPEC_VARIABLE: spec_file}
        build = pipelines.CodeBuildStep(
            "BuildModels", input=source, commands=list(BUILD_COMMANDS), env=env,
            primary_output_directory=BUILD_OUTPUT,
            build_environment=self._gpu_environment(pipeline_spec),
            cache=codebuild.Cache.bucket(cache.bucket, prefix="build"),
            role_policy_statements=self._image_pull(spec, region),
            partial_build_spec=codebuild.BuildSpec.from_object({
                "env": {"variables": {"TRITONSM_CACHE_DIR": f"{CACHE_DIR}/tritonsm"}},
                "phases": {"install": INSTALL},
                "cache": {"paths": [f"{CACHE_DIR}/**/*", f"{WORK_CACHE}/**/*"]}}),
            timeout=cdk.Duration.hours(3))
        synth = pipelines.CodeBuildStep(
            "Synth", input=source, additional_inputs={BUILD_OUTPUT: build}, commands=list(SYNTH_COMMANDS), env=env,
            primary_output_directory="cdk.out", partial_build_spec=codebuild.BuildSpec.from_object(
                {"phases": {"install": INSTALL}}))
        pipeline = pipelines.CodePipeline(
            self, "Pipeline", synth=synth, self_mutation=True, pipeline_type=cdk.aws_codepipeline.PipelineType.V2,
            # A KMS key for the artifact bucket, usable by the stage accounts' deploy roles; rotated yearly.
            cross_account_keys=True, enable_key_rotation=True,
            code_build_defaults=pipelines.CodeBuildOptions(build_environment=codebuild.BuildEnvironment(
                build_image=IMAGE)))
        self.stages: dict[str, TritonStage] = {}
        tested = set(pipeline_spec.tested_stages())
        for name in (pipeline_spec.stages if with_stages else ()):
            stage = make_stage(self, name)
            self.stages[name] = stage
            # The tarballs the stage deploys, checked against the manifest and the signing key before it deploys
            # (and before anyone is asked to approve it).
            verify = pipelines.CodeBuildStep(
                f"VerifyModels-{name}", input=source, additional_inputs={BUILD_OUTPUT: build}, env=env,
                commands=verify_commands(name),
                partial_build_spec=codebuild.BuildSpec.from_object({"phases": {"install": INSTALL}}))
            pre: list[pipelines.Step] = [verify]
            if name in pipeline_spec.manual_approval:
                approval = pipelines.ManualApprovalStep(f"Approve-{name}", comment=f"Release to {name}?")
                approval.add_step_dependency(verify)
                pre.append(approval)
            post = [self._post_deploy(spec, pipeline_spec, name, stage, source, build, env)] if name in tested else []
            pipeline.add_stage(stage, pre=pre, post=post)
        pipeline.build_pipeline()
        self.build_step, self.synth_step, self.pipeline = build, synth, pipeline
        # The GPU comes from the environment type (and the fleet); the curated image is every other step's.
        # CDK types the environment by its image (LINUX_CONTAINER for the curated ones), hence the override.
        project = default_child(build.project, codebuild.CfnProject)
        project.add_property_override("Environment.Type", "LINUX_GPU_CONTAINER")
        if self.fleet is not None:
            project.add_property_override("Environment.ComputeType", "CUSTOM_INSTANCE_TYPE")
            project.add_property_override("Environment.Fleet", {"FleetArn": self.fleet.fleet_arn})
        # cfn-lint style findings on CDK Pipelines' own rendering, valid CloudFormation: stage deploy-role ARNs
        # joined with a Ref to AWS::Partition (E3703 prefers Fn::Sub), and a DependsOn on the pipeline role it
        # also reads with GetAtt (W3005).
        self.add_metadata("cfn-lint", {"config": {"ignore_checks": ["E3703", "W3005"]}})
        log_artifacts(pipeline, cache)
        acknowledge_pipeline_findings(self, pipeline)

    @staticmethod
    def check(spec: Spec) -> None:
        """The pipeline's refusals; app.py calls it before any stage, so a pipeline problem is named first."""
        if spec.pipeline is not None:
            problems = (pipeline_checks.gpu_problems(spec, spec.pipeline) + _account_problems(spec, spec.pipeline)
                        + _image_problems(spec, spec.pipeline))
            if problems:
                raise SynthError("pipeline", problems)

    def _image_pull(self, spec: Spec, region: Optional[str]) -> list[iam.PolicyStatement]:
        """The build's `tritonsm smoke --image` pulls sagemaker-tritonserver from the pipeline region's registry
        (CodeBuild sets AWS_REGION to it: https://docs.aws.amazon.com/codebuild/latest/userguide/build-env-ref-env-vars.html):
        an ECR token, which takes no narrower resource, and image reads on that one repository."""
        assert region is not None  # the spec loader requires the pipeline's region (pipeline.stage_rules)
        repository = self.format_arn(service="ecr", region=region, account=images.account(spec.triton_version, region),
                                     resource="repository", resource_name=triton_images.REPOSITORY)
        return [iam.PolicyStatement(actions=["ecr:GetAuthorizationToken"], resources=["*"]),
                iam.PolicyStatement(actions=["ecr:BatchCheckLayerAvailability", "ecr:BatchGetImage",
                                             "ecr:GetDownloadUrlForLayer"], resources=[repository])]

    def _gpu_environment(self, pipeline_spec: PipelineSpec) -> codebuild.BuildEnvironment:
        """Privileged: the TensorRT build runs trtexec in nvcr.io/nvidia/tensorrt:<triton_version>-py3 via Docker."""
        compute = pipeline_spec.build_compute
        self.fleet = None
        if compute.kind is BuildComputeKind.FLEET:
            # A reserved-capacity fleet of that GPU: billed while it exists (https://aws.amazon.com/codebuild/pricing/).
            self.fleet = codebuild.Fleet(
                self, "GpuFleet", base_capacity=1, compute_type=codebuild.FleetComputeType.CUSTOM_INSTANCE_TYPE,
                environment_type=codebuild.EnvironmentType.LINUX_GPU_CONTAINER,
                compute_configuration=codebuild.ComputeConfiguration(
                    instance_type=ec2.InstanceType(str(compute.instance_type))))
            return codebuild.BuildEnvironment(build_image=IMAGE, privileged=True)
        return codebuild.BuildEnvironment(build_image=IMAGE, privileged=True, compute_type=COMPUTE_TYPE[compute.kind])

    def _post_deploy(self, spec: Spec, pipeline_spec: PipelineSpec, name: str, stage: TritonStage,
                     source: pipelines.IFileSetProducer, build: pipelines.CodeBuildStep,
                     env: dict[str, str]) -> pipelines.CodeBuildStep:
        environment = spec.environments[name]
        endpoints = list(stage.endpoints)
        arns = [self.format_arn(service="sagemaker", resource="endpoint",
                                # SageMaker ARNs carry the endpoint name in lower case.
                                resource_name=checks.endpoint_name(spec.project, name, e).lower(),
                                region=environment.region or self.region, account=environment.account or self.account)
                for e in endpoints]
        queued = [e for e in endpoints if environment.endpoints[e].asynchronous is not None]
        return pipelines.CodeBuildStep(
            f"SmokeAndLoadTest-{name}", input=source, additional_inputs={BUILD_OUTPUT: build}, env=env,
            commands=post_deploy_commands(name, endpoints, phase_seconds=pipeline_spec.load_test_phase_seconds,
                                          concurrency=pipeline_spec.load_test_concurrency, asynchronous=queued),
            primary_output_directory=LOAD_OUTPUT,
            partial_build_spec=codebuild.BuildSpec.from_object({"phases": {"install": INSTALL}}),
            # Only invoking this stage's endpoints: no describe, no other endpoint, no other action (an
            # asynchronous endpoint's smoke request goes through its S3 locations: async_smoke_statements).
            role_policy_statements=[iam.PolicyStatement(actions=["sagemaker:InvokeEndpoint"], resources=arns),
                                    *async_smoke_statements(self, spec, name, queued)])


def async_smoke_statements(stack: cdk.Stack, spec: Spec, environment: str,
                           endpoints: list[str]) -> list[iam.PolicyStatement]:
    """What `tritonsm smoke --deployed` needs of each asynchronous endpoint: InvokeEndpointAsync, the stage's
    storage stack's outputs (the bucket's name), a request under its input prefix, the answer or failure back. The stage bucket's and
    key's names are generated in another stage (no reference can cross into the pipeline stack), so the bucket is
    a wildcard limited to the endpoint's own prefixes, and the key is used only through S3."""
    if not endpoints:
        return []
    env = spec.environments[environment]
    region, account = env.region or stack.region, env.account or stack.account
    names = {e: checks.endpoint_name(spec.project, environment, e) for e in endpoints}
    objects = []
    for e in endpoints:
        settings = env.endpoints[e].asynchronous
        assert settings is not None  # only asynchronous endpoints are passed
        objects += [f"arn:{cdk.Aws.PARTITION}:s3:::*/async/{e}/{part}/*" for part in ("input", "output", "failure")]
        objects += [f"arn:{cdk.Aws.PARTITION}:s3:::{path.removeprefix('s3://').rstrip('/')}/*"
                    for path in (settings.output_path, settings.failure_path) if path]
    sid = "AsyncSmokeTest"
    return [
        iam.PolicyStatement(sid=f"{sid}Invoke", actions=["sagemaker:InvokeEndpointAsync"], resources=[
            stack.format_arn(service="sagemaker", resource="endpoint", resource_name=n.lower(), region=region,
                             account=account)
            for n in names.values()]),
        iam.PolicyStatement(sid=f"{sid}Stacks", actions=["cloudformation:DescribeStacks"], resources=[
            stack.format_arn(service="cloudformation", resource="stack",
                             resource_name=f"{spec.project}-{environment}-Storage/*", region=region, account=account)]),
        iam.PolicyStatement(sid=f"{sid}Objects", actions=["s3:PutObject", "s3:GetObject"], resources=objects),
        iam.PolicyStatement(sid=f"{sid}Key", actions=["kms:Decrypt", "kms:GenerateDataKey"], resources=["*"],
                            conditions={"StringEquals": {"kms:ViaService": f"s3.{region}.amazonaws.com"}}),
    ]


def _image_problems(spec: Spec, pipeline_spec: PipelineSpec) -> list[str]:
    """The build step runs every endpoint in its image, pulled in the pipeline's region."""
    region = pipeline_spec.where(dict(spec.environments))[1]
    if region is None or images.account(spec.triton_version, region) is not None:
        return []
    return [f"the build step runs each endpoint in sagemaker-tritonserver:{spec.triton_version}, pulled in the "
            f"pipeline's region {region}, where the SageMaker SDK lists no such image (regions: "
            f"{', '.join(images.regions(spec.triton_version))}); set pipeline.region to one of those, or choose "
            "a triton_version published there"]


def _account_problems(spec: Spec, pipeline_spec: PipelineSpec) -> list[str]:
    """InvokeEndpoint has no resource policy, so the tests can only reach endpoints in the pipeline's account."""
    out = []
    for name in pipeline_spec.tested_stages():
        account = spec.environments[name].account
        home = pipeline_spec.where(dict(spec.environments))[0]
        if account and home and account != home:
            out.append(f"stage '{name}' (account {account}) is smoke-tested, but the pipeline runs in account "
                       f"{home} and sagemaker:InvokeEndpoint cannot be granted across accounts; "
                       "set pipeline.smoke_test_stages to stages in the pipeline's account, or move the pipeline")
    return out

