"""The load report's cost section: each configuration's best throughput within the threshold, priced as the endpoint
it is recorded for, against its p99 (load.json's ``cost``, a table in load.md, a panel of load.png).

The configurations run the load test's own model on this machine's CPU, so every figure is a CPU stand-in: what the
endpoint's instance type would cost at the rate this CPU sustained, not the endpoint's cost. It is priced only with
``--record ENDPOINT`` (the endpoint says which instance types and regions), else the section says how to get it.
A configuration with no phase within the threshold, or a price the table lacks, has no figure and the reason.
"""
from __future__ import annotations

import dataclasses
import os
from typing import Any, Optional

from deployment_spec.cost.capacity import Measurement
from deployment_spec.cost.figures import money
from deployment_spec.cost.measured_cost import LOCAL_CPU
from deployment_spec.cost.pricing import PriceTable
from tritonsm.benchmarking.cost_per_million import cost_lines, no_region, priced, region_cost, served

NO_ENDPOINT = ("no cost per million: the configurations are priced as the endpoint they are recorded for (its "
               "instance type in each region it is deployed in); rerun with --record ENDPOINT")
FORMULA = ("price per instance-hour / (req/s within the {sla:g} ms threshold × 3600) × 1e6: one instance kept busy at "
           "that rate, no hours per month")


def measured_on(result: dict[str, Any], config: str) -> str:
    """What a configuration of this run was measured on, as capacity.json's ``measured_on`` says it."""
    summary = result["configs"][config]
    return f"local CPU ({os.cpu_count()} cores), {config} ({summary['description']}), {result['model']}"


def section(result: dict[str, Any], spec, endpoint: Optional[str], prices: Optional[PriceTable]) -> dict[str, Any]:
    """One point per configuration and (region, instance type) the endpoint is deployed on."""
    if endpoint is None or prices is None:
        return {"endpoint": None, "points": [], "note": NO_ENDPOINT}
    sla = result["plan"]["latency_threshold_ms"]
    places = served(spec, endpoint)
    points = []
    for name, summary in result["configs"].items():
        measurement = Measurement(summary["max_rps_within_threshold"] or 0.0, sla, summary["p99_ms_at_max"] or 0.0,
                                  measured_on(result, name), result.get("command", ""))
        for region, instance_type in places:
            cost = region_cost(region, instance_type, measurement, prices)
            points.append({"config": name, "p99_ms": summary["p99_ms_at_max"], **dataclasses.asdict(cost)})
    return {"endpoint": endpoint, "throughput_from": "this run (load.json)", "formula": FORMULA.format(sla=sla),
            "points": points, "note": "" if places else no_region(endpoint)}


def stand_in_label(point: dict[str, Any]) -> str:
    if not point["stand_in"]:
        return ""
    return "CPU stand-in" if point["measured_on"] == LOCAL_CPU else f"stand-in (measured on {point['measured_on']})"


def assumes(point: dict[str, Any]) -> str:
    """The price a figure used, or why there is none."""
    if point["usd_per_million"] is None:
        return str(point["unknown"])
    return (f"{point['instance_type']} at ${point['usd_per_hour']:g}/h on demand in {point['region']}, prices of "
            f"{point['price_date']} (source: {point['price_source']})")


def markdown(cost: dict[str, Any]) -> list[str]:
    lines = ["", f"Cost per million inferences against p99, priced as endpoint {cost['endpoint']}"
             if cost["endpoint"] else "Cost per million inferences against p99"]
    if cost.get("formula"):
        lines[-1] += f": {cost['formula']}; throughput from {cost['throughput_from']}."
    if cost["note"]:
        lines += ["", cost["note"]]
    if not cost["points"]:
        return lines
    lines += ["", "| config | region | priced as | stand-in | req/s within threshold | p99 ms | $ per million | assumes |",
              "|---|---|---|---|---:|---:|---:|---|"]
    for p in cost["points"]:
        figure = "unknown" if p["usd_per_million"] is None else money(p["usd_per_million"])
        rps = f"{p['rps_within_sla']:g}" if p["rps_within_sla"] else "-"
        p99 = "-" if p["p99_ms"] is None else f"{p['p99_ms']:g}"
        lines.append(f"| {p['config']} | {p['region']} | {p['instance_type']} | {stand_in_label(p) or 'no'} | {rps} | "
                     f"{p99} | {figure} | {assumes(p)} |")
    if any(p["stand_in"] for p in cost["points"]):
        lines += ["", "A stand-in figure is what the priced instance type would cost at the rate measured elsewhere "
                  "(here the load test's own model on this machine's CPU): not the endpoint's cost."]
    return lines


def endpoint_markdown(spec, endpoint: str, measurement: Optional[Measurement], prices: PriceTable) -> list[str]:
    """load-endpoint.md's cost section: the run's best rate within the threshold priced as the endpoint, per region
    it is deployed in (the endpoint is known, so no --record is needed to price it)."""
    lines = ["", f"Cost per million inferences at the best rate within the threshold, priced as endpoint {endpoint}:",
             ""]
    if measurement is None:
        return lines + ["- none: no phase met the threshold"]
    return lines + [f"- {line}" for line in cost_lines(endpoint, priced(spec, endpoint, measurement, prices))]

