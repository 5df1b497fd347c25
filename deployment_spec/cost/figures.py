"""What each environment's endpoints cost per month: the floor, the ceiling, and with schedules the expected range.

SageMaker real-time inference bills each instance of an endpoint per hour, on demand, whatever its traffic
(https://aws.amazon.com/sagemaker/pricing/). So, per environment and endpoint:

- floor: the fewest instances scaling may keep (``scaling.min_instances``, or ``initial_instances`` without
  scaling) × the hourly price × hours per month (``HOURS_PER_MONTH``, 730: 24 h × 365 d / 12, the month AWS's
  pricing pages use). Scale to zero (a minimum of 0) is a floor of $0.
- ceiling: the most instances (``scaling.max_instances``) × the price × the hours. With fallback instance pools
  (``fallback_instance_types``) the ceiling is priced at the dearest pool's price: SageMaker may launch any of them.
- expected range: with ``scaling.schedules`` of weekly cron expressions, the bounds in force hour by hour over a
  week, averaged (``weekly_bounds``); other schedules (``rate``, ``at``, day-of-month) leave it out.
- inference components: SageMaker bills the endpoint's instances, not the copies of its components: the instances
  ``managed_instances`` keeps, min..max ("Scale an endpoint to zero instances": scaling in to zero instances is
  what saves cost, https://docs.aws.amazon.com/sagemaker/latest/dg/endpoint-auto-scaling-zero-instances.html).
- capacity reservations: the instances launch into an ML reservation (a SageMaker training plan for endpoints),
  which is paid up front for its whole window (CreateTrainingPlan: "After successful upfront payment";
  TrainingPlanOffering.UpfrontFee, https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_TrainingPlanOffering.html;
  https://docs.aws.amazon.com/sagemaker/latest/dg/training-plan-utilization-for-inference-endpoints.html). The fee
  is not in the spec: those instances are shown as prepaid and left out of the on-demand monthly figures.
- cost per million inferences: price per hour / (requests/s per instance within the SLA × 3600) × 1e6, from the
  endpoint's measurement in capacity.json (``tritonsm bench load --record``), labelled with where it was measured.

A price this package does not have is never guessed: the figure shows "unknown price" and why
(``deployment_spec.cost.pricing.PriceTable.missing``), with the instance-hours it would multiply. Pure: no boto3, no
aws_cdk.
"""
from __future__ import annotations

import dataclasses
from typing import Iterable, Mapping, Optional

from deployment_spec.cost.capacity import Measurement
from deployment_spec.cost.measured_cost import is_stand_in
from deployment_spec.sections.endpoint import EndpointKind, EndpointSpec
from deployment_spec.sections.environment import EnvironmentSpec
from deployment_spec.parsing.errors import Problem
from deployment_spec.cost.pricing import Price, PriceTable
from deployment_spec.sections.scaling import Scaling
from deployment_spec.sections.scheduled_scaling import ScheduledScaling
from deployment_spec.cost.weekly_schedule import weekly_bounds

HOURS_PER_MONTH = 730.0


@dataclasses.dataclass(frozen=True)
class Pool:
    """One group of instances billed together: a production variant, a shadow, an inference-components endpoint's
    managed instances."""

    endpoint: str
    where: str                  # how a change names it: "classifier", "classifier.variants.B", ...
    instance_type: str
    min_instances: int
    max_instances: int
    bounds_field: str           # "min_instances" / "managed_instances.min_instances": the field a diff names
    fallbacks: tuple[str, ...] = ()
    schedules: tuple[ScheduledScaling, ...] = ()
    prepaid: bool = False       # launches into a capacity reservation (a training plan's upfront fee)
    scheduled_copies: tuple[str, ...] = ()  # inference components whose copies follow schedules


@dataclasses.dataclass(frozen=True)
class Figure:
    """A monthly figure: the instance-hours behind it, and dollars where every price is known."""

    instance_hours: float
    # Kept also when a price is missing, so a total keeps the dollars it knows and names the hours it cannot price:
    known_usd: float = 0.0                          # the dollars of the priced instance-hours
    unknown: tuple[str, ...] = ()                   # why a price is missing (PriceTable.missing)
    unpriced: tuple[tuple[str, float], ...] = ()    # (instance type, instance-hours) without a price

    @property
    def usd(self) -> Optional[float]:
        """The dollars, where every price is known."""
        return None if self.unpriced else self.known_usd

    def __add__(self, other: "Figure") -> "Figure":
        hours: dict[str, float] = {}
        for instance_type, h in self.unpriced + other.unpriced:
            hours[instance_type] = hours.get(instance_type, 0.0) + h
        return Figure(self.instance_hours + other.instance_hours, self.known_usd + other.known_usd,
                      tuple(dict.fromkeys(self.unknown + other.unknown)), tuple(hours.items()))


ZERO = Figure(0.0)


@dataclasses.dataclass(frozen=True)
class PoolCost:
    pool: Pool
    price: Optional[Price]          # of instance_type
    ceiling_price: Optional[Price]  # the dearest of instance_type and the fallback pools
    floor: Figure
    ceiling: Figure
    expected: Optional[tuple[Figure, Figure]]  # time-weighted (floor, ceiling) over a week of schedules
    notes: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class PerMillion:
    usd: float
    rps: float
    measurement: Measurement
    price: Price

    @property
    def stand_in(self) -> bool:
        """Measured somewhere else than on the priced type (a local CPU, another instance type)."""
        return is_stand_in(self.measurement.measured_on, self.price.instance_type)


@dataclasses.dataclass(frozen=True)
class EndpointCost:
    name: str
    kind: str
    pools: tuple[PoolCost, ...]
    per_million: Optional[PerMillion] = None
    per_million_note: str = ""

    @property
    def floor(self) -> Figure:
        return _sum(p.floor for p in self.pools)

    @property
    def ceiling(self) -> Figure:
        return _sum(p.ceiling for p in self.pools)

    @property
    def expected(self) -> Optional[tuple[Figure, Figure]]:
        if not any(p.expected for p in self.pools):
            return None
        return (_sum(p.expected[0] if p.expected else p.floor for p in self.pools),
                _sum(p.expected[1] if p.expected else p.ceiling for p in self.pools))


@dataclasses.dataclass(frozen=True)
class EnvironmentCost:
    name: str
    region: Optional[str]
    hours: float
    endpoints: tuple[EndpointCost, ...]

    @property
    def floor(self) -> Figure:
        return _sum(e.floor for e in self.endpoints)

    @property
    def ceiling(self) -> Figure:
        return _sum(e.ceiling for e in self.endpoints)

    @property
    def expected(self) -> Optional[tuple[Figure, Figure]]:
        if not any(e.expected for e in self.endpoints):
            return None
        return (_sum(e.expected[0] if e.expected else e.floor for e in self.endpoints),
                _sum(e.expected[1] if e.expected else e.ceiling for e in self.endpoints))

    @property
    def prices(self) -> list[Price]:
        out: dict[tuple[str, str], Price] = {}
        for endpoint in self.endpoints:
            for pool in endpoint.pools:
                for price in (pool.price, pool.ceiling_price):
                    if price is not None:
                        out[(price.instance_type, price.source)] = price
        return list(out.values())

    @property
    def prepaid(self) -> list[Pool]:
        return [p.pool for e in self.endpoints for p in e.pools if p.pool.prepaid]


def _sum(figures: Iterable[Figure]) -> Figure:
    total = ZERO
    for figure in figures:
        total = total + figure
    return total


# ---------------------------------------------------------------------------------------------------- the pools

def pools(endpoint: EndpointSpec) -> list[Pool]:
    """The billed instance groups of an endpoint as an environment deploys it."""
    prepaid = endpoint.capacity_reservation is not None
    if endpoint.kind is EndpointKind.INFERENCE_COMPONENTS:
        bounds = endpoint.instance_bounds
        scheduled = tuple(name for name, c in endpoint.components.items() if c.scaling and c.scaling.schedules)
        return [Pool(endpoint.name, endpoint.name, endpoint.instance_type, bounds.min_instances, bounds.max_instances,
                     "managed_instances.min_instances", endpoint.fallback_instance_types, prepaid=prepaid,
                     scheduled_copies=scheduled)]
    out: list[Pool] = []
    if endpoint.variants:
        for v in endpoint.variants:
            out.append(_variant_pool(endpoint, f"{endpoint.name}.variants.{v.name}", v.instance_type,
                                     v.initial_instances, v.scaling, prepaid))
    else:
        out.append(_variant_pool(endpoint, endpoint.name, None, None, None, prepaid))
    if endpoint.shadow is not None:
        s = endpoint.shadow
        out.append(_variant_pool(endpoint, f"{endpoint.name}.shadow", s.instance_type, s.initial_instances, s.scaling,
                                 prepaid=False))
    return out


def _variant_pool(endpoint: EndpointSpec, where: str, instance_type: Optional[str], initial: Optional[int],
                  scaling: Optional[Scaling], prepaid: bool) -> Pool:
    itype = instance_type or endpoint.instance_type
    scaling = scaling or endpoint.scaling
    count = initial or endpoint.initial_instances
    low, high = (scaling.min_instances, scaling.max_instances) if scaling else (count, count)
    fallbacks = endpoint.fallback_instance_types if itype == endpoint.instance_type else ()
    return Pool(endpoint.name, where, itype, low, high, "min_instances", fallbacks,
                scaling.schedules if scaling else (), prepaid)


# ------------------------------------------------------------------------------------------------- the figures

def pool_cost(pool: Pool, region: Optional[str], prices: PriceTable, hours: float = HOURS_PER_MONTH) -> PoolCost:
    price = prices.lookup(region, pool.instance_type)
    candidates = [pool.instance_type, *pool.fallbacks]
    found = {t: prices.lookup(region, t) for t in candidates}
    missing = tuple(prices.missing(region, t) for t, p in found.items() if p is None)
    known = [p for p in found.values() if p is not None]
    ceiling_price = max(known, key=lambda p: p.usd_per_hour) if known and not missing else None
    notes: list[str] = []
    bounds = _bounds(pool)
    low = min(b[0] for b in bounds)
    high = max(b[1] for b in bounds)
    if pool.prepaid:
        notes.append("prepaid: launches into a capacity reservation, billed as the training plan's upfront fee "
                     "(not in the spec), left out of the on-demand figures")
        floor = Figure(low * hours)
        ceiling = Figure(high * hours)
        return PoolCost(pool, price, ceiling_price, floor, ceiling, None, tuple(notes))
    floor = _figure(low * hours, price, () if price else (prices.missing(region, pool.instance_type),),
                    pool.instance_type)
    # Unpriced, a ceiling is named by the first pool without a price (the fallbacks' dearest is not known).
    ceiling = _figure(high * hours, ceiling_price, missing,
                      next((t for t, p in found.items() if p is None), pool.instance_type))
    if pool.fallbacks and ceiling_price is not None and ceiling_price.instance_type != pool.instance_type:
        notes.append(f"ceiling priced at the dearest fallback pool, {ceiling_price.instance_type} "
                     f"({hourly_rate(ceiling_price)})")
    if pool.scheduled_copies:
        # Instances are billed, copies are not; how many instances a number of copies needs is managed instance
        # scaling's packing of their reservations, which is not modelled here.
        notes.append(f"the schedules of {', '.join(pool.scheduled_copies)} move copies, not managed_instances: the "
                     "instances the copies need stay between the floor and the ceiling; no expected range")
    expected = None
    if pool.schedules:
        weekly = weekly_bounds(pool.min_instances, pool.max_instances, pool.schedules)
        if weekly is None:
            notes.append("schedules not all weekly cron expressions: no expected range")
        else:
            avg_low = sum(b[0] for b in weekly) / len(weekly)
            avg_high = sum(b[1] for b in weekly) / len(weekly)
            expected = (_figure(avg_low * hours, price, floor.unknown, pool.instance_type),
                        _figure(avg_high * hours, ceiling_price, ceiling.unknown,
                                ceiling.unpriced[0][0] if ceiling.unpriced else pool.instance_type))
    return PoolCost(pool, price, ceiling_price, floor, ceiling, expected, tuple(notes))


def _figure(instance_hours: float, price: Optional[Price], unknown: tuple[str, ...], instance_type: str) -> Figure:
    if price is None:
        return Figure(instance_hours, unknown=unknown, unpriced=((instance_type, instance_hours),))
    return Figure(instance_hours, instance_hours * price.usd_per_hour)


def _bounds(pool: Pool) -> list[tuple[int, int]]:
    """Every (min, max) that may be in force: the scaling's, and after each schedule."""
    out = [(pool.min_instances, pool.max_instances)]
    low, high = pool.min_instances, pool.max_instances
    for schedule in pool.schedules:
        s_low, s_high = schedule.bounds
        out.append((s_low if s_low is not None else low, s_high if s_high is not None else high))
    return out


def endpoint_cost(endpoint: EndpointSpec, region: Optional[str], prices: PriceTable,
                  measurement: Optional[Measurement] = None, hours: float = HOURS_PER_MONTH) -> EndpointCost:
    costs = tuple(pool_cost(p, region, prices, hours) for p in pools(endpoint))
    per_million, note = None, ""
    if measurement is not None:
        price = costs[0].price if costs else None
        if price is None:
            note = "cost per million inferences: " + prices.missing(region, endpoint.instance_type)
        elif measurement.max_rps_per_instance <= 0:
            note = "cost per million inferences: capacity.json measured no throughput within the SLA"
        else:
            per_million = PerMillion(per_million_usd(price.usd_per_hour, measurement.max_rps_per_instance),
                                     measurement.max_rps_per_instance, measurement, price)
    return EndpointCost(endpoint.name, endpoint.kind.value, costs, per_million, note)


def per_million_usd(usd_per_hour: float, rps_per_instance: float) -> float:
    """Cost of a million inferences on one instance kept busy at ``rps_per_instance`` (within the SLA)."""
    return usd_per_hour / (rps_per_instance * 3600) * 1e6


def environment_cost(env: EnvironmentSpec, prices: PriceTable, capacity: Mapping[str, Measurement] | None = None,
                     hours: float = HOURS_PER_MONTH) -> EnvironmentCost:
    capacity = capacity or {}
    return EnvironmentCost(env.name, env.region, hours, tuple(
        endpoint_cost(ep, env.region, prices, capacity.get(name), hours) for name, ep in env.endpoints.items()))


def spec_costs(environments: Mapping[str, EnvironmentSpec], prices: PriceTable,
               capacity: Mapping[str, Measurement] | None = None, hours: float = HOURS_PER_MONTH
               ) -> dict[str, EnvironmentCost]:
    return {name: environment_cost(env, prices, capacity, hours) for name, env in environments.items()}


# ------------------------------------------------------------------------------------------------- wording

def money(usd: float) -> str:
    return f"${usd:,.0f}" if usd >= 100 else f"${usd:,.2f}"


def hourly_rate(price: Price) -> str:
    return f"${price.usd_per_hour:g}/h"


def _hours(figure: Figure) -> str:
    return f"{figure.instance_hours:,.0f} instance-hours"


def amount(figure: Figure) -> str:
    """``$1,210``; ``unknown price (1,460 instance-hours of ml.g6.xlarge)``; or, priced in part, the dollars known and
    the hours that are not: ``$1,028 + unknown price (730 instance-hours of ml.g6.xlarge)``."""
    if figure.usd is not None:
        return money(figure.usd)
    unpriced = ", ".join(f"{h:,.0f} instance-hours of {t}" for t, h in figure.unpriced) or _hours(figure)
    known = figure.instance_hours - sum(h for _, h in figure.unpriced)
    return (f"{money(figure.known_usd)} + " if figure.unpriced and known > 0 else "") + f"unknown price ({unpriced})"


def assumptions(cost: EnvironmentCost) -> str:
    dates = sorted({p.date for p in cost.prices})
    priced = f", prices of {' and '.join(dates)}" if dates else ""
    return f"{cost.region or 'no region'} on-demand{priced}, {cost.hours:g} h"


def pool_price_label(price: Price) -> str:
    return f"{price.instance_type} at {hourly_rate(price)} in {price.region}, prices of {price.date}"


# ----------------------------------------------------------------------------------------------------- budget

def budget_problems(path: str, env: EnvironmentSpec, prices: PriceTable,
                    hours: float = HOURS_PER_MONTH) -> list[Problem]:
    """``budget.monthly_usd`` against the environment's ceiling; an unpriced ceiling cannot be held to it."""
    if env.budget is None:
        return []
    where = f"{path}.budget.monthly_usd"
    budget = env.budget.monthly_usd
    cost = environment_cost(env, prices, hours=hours)
    ceiling = cost.ceiling
    if ceiling.usd is None:
        return [Problem(where, f"{money(budget)} against a ceiling that cannot be priced ({ceiling.unknown[0]})",
                        "a budget for an environment whose instance types have prices",
                        "refresh the prices (tritonsm prices refresh), or remove budget")]
    if ceiling.usd <= budget:
        return []
    parts = ", ".join(f"{e.name} {amount(e.ceiling)}" for e in cost.endpoints)
    return [Problem(where, f"{money(budget)}, below the monthly ceiling of {money(ceiling.usd)} ({parts}; "
                    f"{assumptions(cost)})",
                    "a budget at least the ceiling: every endpoint at its maximum instances, on demand",
                    f"raise budget.monthly_usd to {ceiling.usd:,.0f} or more, or lower the endpoints' max_instances")]
