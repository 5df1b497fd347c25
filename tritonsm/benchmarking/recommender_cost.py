"""Our cost per million inferences against the Inference Recommender's own, for an imported job.

AWS's ``CostPerInference`` × 1e6 is its cost per million; ours is priced from our price table at the rate the job
measured (``MaxInvocations`` / 60), in the region the job ran in, so the two differ only by the price and by how
AWS computes its figure. The ratio is ours / AWS's. Where either side is unknown the line says which and why, and
gives no ratio.
"""
from __future__ import annotations

from deployment_spec.cost.capacity import Measurement
from deployment_spec.cost.figures import money
from deployment_spec.cost.pricing import PriceTable
from tritonsm.benchmarking.cost_per_million import figure_text, region_cost


def comparison(measurement: Measurement, prices: PriceTable) -> str:
    """``Inference Recommender job J in R, T: AWS's ... ; ours ...; ours / AWS's = 0.98``."""
    aws = measurement.recommender_cost
    if aws is None:
        raise ValueError("comparison() needs a measurement imported from an Inference Recommender job")
    ours = region_cost(aws.region, aws.instance_type, measurement, prices)
    if aws.cost_per_inference is None:
        theirs = None
        aws_text = f"AWS's cost per million unknown: {aws.not_reported}"
    else:
        theirs = aws.cost_per_inference * 1e6
        hourly = f", CostPerHour {aws.cost_per_hour:g}" if aws.cost_per_hour is not None else ""
        aws_text = f"AWS's CostPerInference {aws.cost_per_inference:.4g} × 1e6 = {money(theirs)} per million{hourly}"
    ours_text = f"ours {figure_text(ours)}" if ours.usd_per_million is not None else f"ours unknown: {ours.unknown}"
    if theirs is None or ours.usd_per_million is None:
        unknown = [side for side, value in (("AWS's figure", theirs), ("ours", ours.usd_per_million)) if value is None]
        ratio = "no ratio: " + ("both are unknown" if len(unknown) == 2 else f"{unknown[0]} is unknown")
    elif theirs == 0:
        ratio = "no ratio: AWS's CostPerInference is 0"
    else:
        ratio = f"ours / AWS's = {ours.usd_per_million / theirs:.2f}"
    return f"Inference Recommender job {aws.job} in {aws.region}, {aws.instance_type}: {aws_text}; {ours_text}; {ratio}"
