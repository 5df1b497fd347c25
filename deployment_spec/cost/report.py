"""How the cost figures read (deployment_spec.cost.figures): a line per stage, endpoint and pool for `tritonsm cost` and the
synth's cost report, and the change between two specs for `tritonsm cost --diff`, each change named by the setting
that moved it. Pure: no boto3, no aws_cdk."""
from __future__ import annotations

from typing import Mapping

from deployment_spec.cost.figures import (EndpointCost, EnvironmentCost, Figure, PoolCost, amount, assumptions, money,
                                  pool_price_label, hourly_rate)


def stage_line(cost: EnvironmentCost) -> str:
    """``prod: floor $X / month, ceiling $Y / month (us-east-1 on-demand, prices of DATE, 730 h)``."""
    line = f"{cost.name}: floor {amount(cost.floor)} / month, ceiling {amount(cost.ceiling)} / month"
    if cost.expected:
        line += f", expected {amount(cost.expected[0])} to {amount(cost.expected[1])} / month with the schedules"
    line += f" ({assumptions(cost)})"
    if cost.prepaid:
        line += f"; plus the prepaid capacity reservations of {', '.join(sorted({p.endpoint for p in cost.prepaid}))}"
    return line


def endpoint_lines(cost: EndpointCost, hours: float) -> list[str]:
    out = [f"  {cost.name} ({cost.kind}): floor {amount(cost.floor)}, ceiling {amount(cost.ceiling)} / month"]
    for p in cost.pools:
        pool = p.pool
        rate = hourly_rate(p.price) if p.price else "unknown price"
        out.append(f"    {pool.where}: {pool.min_instances}..{pool.max_instances} × {pool.instance_type} at {rate} "
                   f"× {hours:g} h" + (f"; fallback pools {', '.join(pool.fallbacks)}" if pool.fallbacks else ""))
        if p.expected:
            out.append(f"      expected with the schedules: {amount(p.expected[0])} to {amount(p.expected[1])} / month")
        out += [f"      {note}" for note in p.notes]
    if cost.per_million is not None:
        m = cost.per_million
        label = (f"measured on {m.measurement.measured_on}, not on {m.price.instance_type}: a stand-in figure, not "
                 f"this endpoint's cost" if m.stand_in else f"measured on {m.measurement.measured_on}")
        out.append(f"    cost per million inferences: {money(m.usd)} at {m.rps:g} requests/s per instance within the "
                   f"{m.measurement.latency_sla_ms:g} ms SLA (p99 {m.measurement.p99_ms:g} ms; capacity.json, {label}; "
                   f"{pool_price_label(m.price)})")
    elif cost.per_million_note:
        out.append(f"    {cost.per_million_note}")
    return out


def report(costs: Mapping[str, EnvironmentCost]) -> list[str]:
    """One line per stage, then one per endpoint and pool, then the price sources and what was not priced."""
    out: list[str] = []
    unknown: dict[str, None] = {}
    sources: dict[str, None] = {}
    for cost in costs.values():
        out.append(stage_line(cost))
        for endpoint in cost.endpoints:
            out += endpoint_lines(endpoint, cost.hours)
        for figure in (cost.floor, cost.ceiling):
            unknown.update(dict.fromkeys(figure.unknown))
        sources.update(dict.fromkeys(f"{p.source} ({p.date})" for p in cost.prices))
    out += [f"prices: {s}" for s in sources]
    out += [f"note: {u}" for u in unknown]
    return out


def _pct(old: float, new: float) -> str:
    if old == 0:
        return "new" if new else "0 %"
    return f"{(new - old) / old * 100:+.0f} %"


def _change(label: str, old: Figure, new: Figure) -> str | None:
    if old.usd is not None and new.usd is not None:
        if round(old.usd, 2) == round(new.usd, 2):
            return None
        return f"{label} {money(old.usd)} → {money(new.usd)} / month ({_pct(old.usd, new.usd)})"
    if old.instance_hours == new.instance_hours and old.usd == new.usd:
        return None
    if (old.usd is None) != (new.usd is None):
        # Priced on one side only (a type without a price came or went): both as they are; `tritonsm cost` says
        # which price is missing and how to get it.
        return f"{label} {amount(old)} → {amount(new)} / month"
    return (f"{label} {old.instance_hours:,.0f} → {new.instance_hours:,.0f} instance-hours / month "
            f"({_pct(old.instance_hours, new.instance_hours)}; unknown price)")


def _pool_changes(old: Mapping[str, PoolCost], new: Mapping[str, PoolCost], bound: str) -> list[str]:
    out = []
    for where in list(dict.fromkeys([*old, *new])):
        a, b = old.get(where), new.get(where)
        if a is None or b is None:
            pool = (a or b).pool  # type: ignore[union-attr]
            out.append(f"{where} {'added' if a is None else 'removed'} ({pool.min_instances}..{pool.max_instances} × "
                       f"{pool.instance_type})")
            continue
        pa, pb = a.pool, b.pool
        field = pa.bounds_field if bound == "min" else pa.bounds_field.replace("min_instances", "max_instances")
        va, vb = (pa.min_instances, pb.min_instances) if bound == "min" else (pa.max_instances, pb.max_instances)
        if va != vb:
            out.append(f"{where} {field} {va} → {vb}")
        if pa.instance_type != pb.instance_type:
            out.append(f"{where} instance_type {pa.instance_type} → {pb.instance_type}")
        if bound == "max" and pa.fallbacks != pb.fallbacks:
            out.append(f"{where} fallback_instance_types [{', '.join(pa.fallbacks)}] → [{', '.join(pb.fallbacks)}]")
        if bound == "min" and pa.schedules != pb.schedules:
            out.append(f"{where} schedules changed")
        if pa.prepaid != pb.prepaid:
            out.append(f"{where} capacity_reservation {'removed' if pa.prepaid else 'added'}")
        price_a = a.price if bound == "min" else a.ceiling_price
        price_b = b.price if bound == "min" else b.ceiling_price
        if price_a and price_b and price_a.instance_type == price_b.instance_type and \
                price_a.usd_per_hour != price_b.usd_per_hour:
            out.append(f"{price_a.instance_type} price {hourly_rate(price_a)} → {hourly_rate(price_b)}")
    return out


def diff(old: Mapping[str, EnvironmentCost], new: Mapping[str, EnvironmentCost]) -> list[str]:
    """``prod floor $1,210 → $2,420 / month (+100 %): classifier min_instances 1 → 2``, per changed figure."""
    out: list[str] = []
    for name in list(dict.fromkeys([*old, *new])):
        a, b = old.get(name), new.get(name)
        if a is None or b is None:
            cost = a or b
            out.append(f"{name}: environment {'added' if a is None else 'removed'} ({stage_line(cost)})")  # type: ignore[arg-type]
            continue
        pools_a = {p.pool.where: p for e in a.endpoints for p in e.pools}
        pools_b = {p.pool.where: p for e in b.endpoints for p in e.pools}
        lines = []
        for label, bound, fa, fb in ((f"{name} floor", "min", a.floor, b.floor),
                                     (f"{name} ceiling", "max", a.ceiling, b.ceiling)):
            change = _change(label, fa, fb)
            reasons = _pool_changes(pools_a, pools_b, bound)
            if change is None and reasons and (fa.usd is None or fb.usd is None):
                # The same instance-hours, but a change that moves the dollars, which are unknown here.
                change = f"{label} {fb.instance_hours:,.0f} instance-hours / month either way (unknown price)"
            if change:
                lines.append(change + (": " + "; ".join(reasons) if reasons else ""))
        out += lines or [f"{name}: no change (floor {amount(b.floor)}, ceiling {amount(b.ceiling)} / month)"]
    return out
