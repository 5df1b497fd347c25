"""The construct library's ``Alarms``: the spec's thresholds, plus a topic of your own to notify."""
from __future__ import annotations

import dataclasses
from typing import Optional

from aws_cdk import aws_sns as sns

from deployment_spec.sections.endpoint import Alarms as SpecAlarms
from deployment_spec.parsing.errors import Problem


@dataclasses.dataclass(frozen=True)
class Alarms(SpecAlarms):
    """Alarm thresholds (as the spec's ``alarms``) and where they notify.

    Attributes:
        topic: Notify this SNS topic (the team's on-call topic, from any stack) on alarm and on OK. When it is
            encrypted, its key policy must let ``cloudwatch.amazonaws.com`` use the key (CloudWatch publishes
            with it). Defaults to none; ``sns_topic=True`` creates an encrypted topic instead.
    """

    topic: Optional[sns.ITopic] = None

    @classmethod
    def notifying(cls, thresholds: SpecAlarms, topic: Optional[sns.ITopic]) -> SpecAlarms:
        """The spec's thresholds, notifying ``topic`` unless they ask for an endpoint topic of their own
        (``sns_topic``) or ``topic`` is None."""
        if topic is None or thresholds.sns_topic:
            return thresholds
        return cls(**{f.name: getattr(thresholds, f.name) for f in dataclasses.fields(SpecAlarms)}, topic=topic)

    def problems(self, path: str) -> list[Problem]:
        if self.topic is not None and self.sns_topic:
            return [Problem("topic", "a topic together with sns_topic=True", "one of them",
                            "remove sns_topic=True to notify your topic, or topic= to have one created")]
        return []
