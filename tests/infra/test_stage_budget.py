"""An environment's budget (deployment_spec.cost.figures, triton_constructs.stage_budget): every billable resource of the stage
tagged, an AWS Budgets cost budget on that tag alerting the stage's alarm topic, which Budgets may publish to."""
import json

import pytest

from synth_helpers import SPECS, synth_spec


@pytest.fixture(scope="module")
def budgeted(module_tmp):
    return synth_spec(SPECS / "budgeted.yaml", module_tmp.mktemp("budgeted"))


def test_the_storage_stack_holds_a_monthly_cost_budget_on_the_stage_tag(budgeted):
    budget, = budgeted.template("prod").find_resources("AWS::Budgets::Budget").values()
    data = budget["Properties"]["Budget"]
    assert (data["BudgetType"], data["TimeUnit"], data["BudgetLimit"]) == ("COST", "MONTHLY",
                                                                           {"Amount": 5000, "Unit": "USD"})
    assert data["CostFilters"] == {"TagKeyValue": ["user:tritonsm-stage$Budgeted-prod"]}
    assert data["BudgetName"] == "Budgeted-prod endpoints"
    alerts = [(n["Notification"]["NotificationType"], n["Notification"]["Threshold"])
              for n in budget["Properties"]["NotificationsWithSubscribers"]]
    assert alerts == [("ACTUAL", 80), ("ACTUAL", 100), ("FORECASTED", 100)]
    topic, = budgeted.template("prod").find_resources("AWS::SNS::Topic")
    assert all(n["Subscribers"] == [{"SubscriptionType": "SNS", "Address": {"Ref": topic}}]
               for n in budget["Properties"]["NotificationsWithSubscribers"])


def test_budgets_may_publish_to_the_encrypted_alarm_topic(budgeted):
    template = budgeted.template("prod")
    policy, = template.find_resources("AWS::SNS::TopicPolicy").values()
    publish = [s for s in policy["Properties"]["PolicyDocument"]["Statement"] if s.get("Sid") == "BudgetsPublish"]
    assert publish and publish[0]["Principal"] == {"Service": "budgets.amazonaws.com"}
    assert set(publish[0]["Condition"]) == {"StringEquals", "ArnLike"}
    key, = template.find_resources("AWS::KMS::Key").values()
    # CDK merges it with CloudWatch's identical grant (allow_alarms) into one statement.
    assert any("budgets.amazonaws.com" in json.dumps(s["Principal"]) and "kms:GenerateDataKey*" in s["Action"]
               for s in key["Properties"]["KeyPolicy"]["Statement"])


def test_every_taggable_resource_of_the_stage_carries_the_cost_tag(budgeted):
    tagged = {"AWS::SageMaker::Endpoint", "AWS::SageMaker::EndpointConfig", "AWS::SageMaker::Model",
              "AWS::S3::Bucket", "AWS::KMS::Key", "AWS::SNS::Topic", "AWS::Lambda::Function"}
    seen = set()
    for template in (budgeted.template("prod"), budgeted.template("prod", "classifier")):
        for kind in tagged:
            for resource in template.find_resources(kind).values():
                tags = resource["Properties"].get("Tags", [])
                assert {"Key": "tritonsm-stage", "Value": "Budgeted-prod"} in tags, (kind, tags)
                seen.add(kind)
    assert {"AWS::SageMaker::Endpoint", "AWS::SageMaker::EndpointConfig", "AWS::SageMaker::Model"} <= seen


def test_a_stage_without_a_budget_gets_neither_tag_nor_budget(default_synth):
    assert default_synth.template("prod").find_resources("AWS::Budgets::Budget") == {}
    for resource in default_synth.template("prod", "classifier").find_resources("AWS::SageMaker::Endpoint").values():
        assert all(t["Key"] != "tritonsm-stage" for t in resource["Properties"].get("Tags", []))


def test_the_budget_is_refused_below_the_stage_s_ceiling(tmp_path):
    from deployment_spec import load_spec
    from deployment_spec.parsing.errors import SpecError
    (tmp_path / "build").mkdir()
    spec = tmp_path / "budgeted.yaml"
    spec.write_text((SPECS / "budgeted.yaml").read_text().replace("monthly_usd: 5000", "monthly_usd: 4000"))
    (tmp_path / "build" / "prices").symlink_to(SPECS / "build" / "prices")
    with pytest.raises(SpecError) as caught:
        load_spec(spec)
    assert "environments.prod.budget.monthly_usd: got $4,000, below the monthly ceiling of $4,380" in str(caught.value)


def test_an_example_budget_synthesizes_from_the_shipped_prices_alone(every_assembly):
    # The pull-request workflow's conditions: a fresh clone, no AWS credentials, no refreshed price file: the
    # shipped snapshot prices the stage (its ceiling $7,526 a month), so the budget's check and resource synthesize.
    example = every_assembly["examples/bert-large-tuned-sme"]
    assert not (example.spec_path.parent / "build" / "prices").exists()
    budget, = [r for r in example.template("prod")["Resources"].values() if r["Type"] == "AWS::Budgets::Budget"]
    assert budget["Properties"]["Budget"]["BudgetLimit"] == {"Amount": 8000, "Unit": "USD"}
