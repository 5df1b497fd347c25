"""What a measured throughput costs per million inferences, in each region the spec serves the endpoint in.

price per instance-hour / (requests/s per instance within the latency SLA × 3600) × 1e6
(deployment_spec.cost.figures.per_million_usd): one instance kept busy at the highest rate that met the SLA. No hours per
month enter it: it is a price per inference, whatever the traffic. Each figure keeps what it assumes
(deployment_spec.cost.measured_cost.RegionCost: region, the type priced, the price's source and date, the rate, where
it was measured). A measurement taken elsewhere than on the type the endpoint is served on (the local CPU, another
instance type) is a stand-in, and every line that shows it says so. A price the table lacks stays unknown, with
the reason and the command that fetches it.
"""
from __future__ import annotations

import dataclasses
import re

from deployment_spec.cost.capacity import Measurement
from deployment_spec.cost.figures import money, per_million_usd, pool_price_label
from deployment_spec.cost.measured_cost import RegionCost, is_stand_in, measured_hardware
from deployment_spec.cost.pricing import Price, PriceTable


def served(spec, endpoint: str) -> list[tuple[str, str]]:
    """(region, instance type) of each environment that deploys the endpoint: an environment may override the type."""
    return sorted({(env.region, env.endpoints[endpoint].instance_type) for env in spec.environments.values()
                   if endpoint in env.endpoints and env.region})


def region_cost(region: str, instance_type: str, measurement: Measurement, prices: PriceTable) -> RegionCost:
    hardware = measured_hardware(measurement.measured_on)
    rps = measurement.max_rps_per_instance
    unknown = RegionCost(region, instance_type, hardware, is_stand_in(measurement.measured_on, instance_type), rps,
                         measurement.latency_sla_ms, None)
    if rps <= 0:
        return dataclasses.replace(unknown, unknown=(
            f"nothing to price: no throughput within the {measurement.latency_sla_ms:g} ms latency threshold "
            f"({rps:g} req/s per instance)"))
    price = prices.lookup(region, instance_type)
    if price is None:
        return dataclasses.replace(unknown, unknown=prices.missing(region, instance_type))
    return dataclasses.replace(unknown, usd_per_million=round(per_million_usd(price.usd_per_hour, rps), 6),
                               usd_per_hour=price.usd_per_hour, price_source=price.source, price_date=price.date)


def priced(spec, endpoint: str, measurement: Measurement, prices: PriceTable) -> Measurement:
    """The measurement with its cost per million in every region the spec serves the endpoint in."""
    return dataclasses.replace(measurement, cost_per_million=tuple(
        region_cost(region, instance_type, measurement, prices) for region, instance_type in served(spec, endpoint)))


def figure_text(cost: RegionCost) -> str:
    """``$44.44 per million inferences in us-east-1 at 12.5 req/s ...``, or the reason there is no figure."""
    if cost.usd_per_million is None or cost.usd_per_hour is None:
        return cost.unknown or f"unknown price: {cost.instance_type} in {cost.region}"
    price = Price(cost.usd_per_hour, cost.region, cost.instance_type, cost.price_source or "", cost.price_date or "")
    return (f"{money(cost.usd_per_million)} per million inferences in {cost.region} at {cost.rps_within_sla:g} req/s "
            f"per instance within the {cost.latency_sla_ms:g} ms SLA ({pool_price_label(price)}, on demand, source: "
            f"{cost.price_source})")


def stand_in_text(measured_on: str, cost: RegionCost) -> str:
    """What the figure is not, when it was measured elsewhere than on the type it prices; else ``""``."""
    if not cost.stand_in:
        return ""
    kind = "a CPU stand-in figure" if cost.cpu_stand_in else "a stand-in figure"
    return f"measured on {measured_on}, not on {cost.instance_type}: {kind}, not the endpoint's cost"


def cost_lines(endpoint: str, measurement: Measurement) -> list[str]:
    """The recorded figures (``priced``), one line per region, as `bench load --record` prints them."""
    costs = measurement.cost_per_million or ()
    if not costs:
        return [no_region(endpoint)]
    out = []
    for cost in costs:
        stand_in = stand_in_text(measurement.measured_on, cost)
        out.append(figure_text(cost) + (f"; {stand_in}" if stand_in and cost.usd_per_million is not None else ""))
    return out


def no_region(endpoint: str) -> str:
    return (f"no cost per million for endpoint {endpoint}: no environment of the spec deploys it with a region "
            "(prices are per region); set environments.<name>.region of those that deploy it")
