"""Where the model and the library's own Lambda functions run: private subnets, or a reasoned opt-in."""
import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk.assertions import Match, Template

from user_app import model_archive, user_stack
from triton_constructs import (ModelArchive, ModelRepositories, NetworkProps, PropsError, Scaling,
                               TritonSageMakerEndpoint)


def _public_only(stack) -> ec2.Vpc:
    return ec2.Vpc(stack, "Vpc", max_azs=2, nat_gateways=0, subnet_configuration=[
        ec2.SubnetConfiguration(name="public", subnet_type=ec2.SubnetType.PUBLIC)])


def _private(stack) -> ec2.Vpc:
    return ec2.Vpc(stack, "Vpc", max_azs=2, nat_gateways=0, subnet_configuration=[
        ec2.SubnetConfiguration(name="public", subnet_type=ec2.SubnetType.PUBLIC),
        ec2.SubnetConfiguration(name="private", subnet_type=ec2.SubnetType.PRIVATE_ISOLATED)])


def _endpoint(tmp_path, stack, network: NetworkProps, **props) -> TritonSageMakerEndpoint:
    models = ModelRepositories.from_archives([ModelArchive.from_file(model_archive(tmp_path, "resnet50"))])
    return TritonSageMakerEndpoint(stack, "Endpoint", models=models, instance_type="ml.g5.xlarge", network=network,
                                   **props)


def test_a_vpc_with_public_subnets_only_is_refused(tmp_path):
    stack = user_stack()
    with pytest.raises(PropsError) as caught:
        _endpoint(tmp_path, stack, NetworkProps(vpc=_public_only(stack)))
    assert str(caught.value) == (
        "TritonSageMakerEndpoint UserApp/Endpoint: 1 problem\n  - network.subnets: got a VPC with public subnets only; "
        "allowed: private or isolated subnets: the model and the functions need no inbound route from the internet "
        "(https://docs.aws.amazon.com/sagemaker/latest/dg/host-vpc.html); fix: add private subnets to the VPC (with an "
        "S3 gateway endpoint for the model data), or select the public ones explicitly with subnets=ec2.SubnetSelection("
        "subnet_type=ec2.SubnetType.PUBLIC) and say why in public_subnets_reason")


def test_public_subnets_chosen_with_a_reason_are_served(tmp_path):
    stack = user_stack()
    vpc = _public_only(stack)
    _endpoint(tmp_path, stack, NetworkProps(vpc=vpc, subnets=ec2.SubnetSelection(subnet_type=ec2.SubnetType.PUBLIC),
                                            public_subnets_reason="a lab account whose VPC has no private subnets"))
    subnets = Template.from_stack(stack).find_resources("AWS::SageMaker::Model")
    [model] = subnets.values()
    assert len(model["Properties"]["VpcConfig"]["Subnets"]) == 2


def test_private_subnets_are_chosen_over_public_ones(tmp_path):
    stack = user_stack()
    vpc = _private(stack)
    _endpoint(tmp_path, stack, NetworkProps(vpc=vpc))
    [model] = Template.from_stack(stack).find_resources("AWS::SageMaker::Model").values()
    chosen = [stack.resolve(s) for s in model["Properties"]["VpcConfig"]["Subnets"]]
    assert chosen == [stack.resolve(s.subnet_id) for s in vpc.isolated_subnets]


def test_the_library_s_functions_run_in_the_vpc_by_default(tmp_path):
    # No functions_in_vpc: a VPC given is where they run (AWS Control Tower's CT.LAMBDA.PR.3).
    stack = user_stack()
    _endpoint(tmp_path, stack, NetworkProps(vpc=_private(stack)), scaling=Scaling(max_instances=2))
    template = Template.from_stack(stack)
    functions = template.find_resources("AWS::Lambda::Function")
    assert len(functions) == 2  # the model copy and the scaling handover
    assert all("VpcConfig" in f["Properties"] for f in functions.values())
    # Their own group: no inbound rule, HTTPS out only; and the network-interface actions, inline.
    template.has_resource_properties("AWS::EC2::SecurityGroup", {
        "GroupDescription": "Triton endpoint Lambda functions: AWS APIs over HTTPS only",
        "SecurityGroupEgress": [Match.object_like({"FromPort": 443, "ToPort": 443, "IpProtocol": "tcp"})]})
    template.has_resource_properties("AWS::IAM::Policy", {"PolicyDocument": {"Statement": Match.array_with([
        Match.object_like({"Action": Match.array_with(["ec2:CreateNetworkInterface"]), "Resource": "*"})])}})


def test_functions_stay_on_lambda_s_network_when_asked(tmp_path):
    # functions_in_vpc=False beside a VPC: no VpcConfig, and the Control Tower finding is acknowledged as a choice.
    stack = user_stack()
    endpoint = _endpoint(tmp_path, stack, NetworkProps(vpc=_private(stack), functions_in_vpc=False),
                         scaling=Scaling(max_instances=2))
    functions = Template.from_stack(stack).find_resources("AWS::Lambda::Function")
    assert len(functions) == 2 and not any("VpcConfig" in f["Properties"] for f in functions.values())
    acknowledged = [str(entry.data) for c in endpoint.node.find_all() for entry in c.node.metadata
                    if "lambda_inside_vpc_check" in str(entry.data)]
    assert len(acknowledged) == 2, acknowledged


def test_functions_in_a_vpc_need_a_vpc():
    with pytest.raises(PropsError) as caught:
        NetworkProps(functions_in_vpc=True)
    assert str(caught.value) == (
        "NetworkProps: 1 problem\n  - functions_in_vpc: got a function placement without a vpc; allowed: "
        "functions_in_vpc and function_security_groups together with vpc; fix: pass vpc=, or leave the functions on "
        "Lambda's network")
