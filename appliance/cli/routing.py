"""`picoagent providers`, `usage` and `routing`: the cloud models, what they cost, and where turns went."""

from __future__ import annotations

import argparse
from typing import Any

from appliance.cli.common import action, load, open_db, print_json


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser) -> None:
    """The `providers` and `usage` commands and the `routing` command group."""
    prov = action(sub, common, "providers", "the cloud models configured, and the routing mode", cmd_providers)
    prov.add_argument(
        "--check", action="store_true", help="ask each provider for one token (costs a request); exit 1 if one fails"
    )
    prov.add_argument("--json", action="store_true", help="print as JSON")
    usage = action(sub, common, "usage", "tokens and cloud cost by day and provider", cmd_usage)
    usage.add_argument("--days", type=int, default=30, help="how many days back (default 30)")
    usage.add_argument("--json", action="store_true", help="print as JSON")
    routing = sub.add_parser("routing", parents=[common], help="where messages were answered, and why")
    rsub = routing.add_subparsers(dest="routing_command", required=True, metavar="COMMAND")
    rstats = action(rsub, common, "stats", "how often and why messages went to the cloud", cmd_routing_stats)
    rstats.add_argument("--days", type=int, default=30, help="how many days back (default 30)")
    rstats.add_argument("--json", action="store_true", help="print as JSON")


def cmd_providers(args: argparse.Namespace) -> int:
    """The configured cloud providers (never their keys), the routing mode, and optionally a live check."""
    config = load(args)
    routing = config.routing
    rows: list[dict[str, Any]] = []
    for name, provider in config.providers.items():
        rows.append(
            {
                "name": name,
                "type": provider.type,
                "api_base": provider.api_base,
                "model": provider.model,
                "api_key": "set" if provider.api_key else "not set",
                "price_in_per_mtok": provider.price_in_per_mtok,
                "price_out_per_mtok": provider.price_out_per_mtok,
                "escalates_to": name == routing.cloud_provider and routing.mode != "local_only",
            }
        )
    failed = False  # a check that failed: the exit code says so (1), for scripts and `&&`
    if args.check:
        import asyncio

        for row, (name, provider) in zip(rows, config.providers.items(), strict=True):
            ok, row["check"] = asyncio.run(_check_provider(name, provider))
            failed = failed or not ok
    summary = {
        "mode": routing.mode,
        "cloud_provider": routing.cloud_provider,
        "min_confidence": routing.min_confidence,
        "local_only_channels": routing.local_only_channels,
        "daily_budget_usd": routing.daily_budget_usd,
        "monthly_budget_usd": routing.monthly_budget_usd,
        "providers": rows,
    }
    if args.json:
        print_json(summary)
        return 1 if failed else 0
    if routing.mode == "local_only":
        print("routing: local_only (nothing leaves the Pi; set routing.mode: edge_first to escalate)")
    else:
        print(
            f"routing: {routing.mode} to {routing.cloud_provider}: {_hard_bar()}a local answer below confidence"
            f" {routing.min_confidence:g}; budget ${routing.daily_budget_usd:g}/day,"
            f" ${routing.monthly_budget_usd:g}/month"
        )
    if not rows:
        print("no providers: add one under providers: in the config (see README, Cloud escalation)")
    for row in rows:
        mark = "  <- escalates here" if row["escalates_to"] else ""
        print(
            f"{row['name']:12} {row['type']:9} {row['model']:28} {row['api_base']}  key {row['api_key']}"
            f"  ${row['price_in_per_mtok']:g}/${row['price_out_per_mtok']:g} per Mtok{mark}"
        )
        if "check" in row:
            print(f"{'':12} check: {row['check']}")
    return 1 if failed else 0


async def _check_provider(name: str, provider: Any) -> tuple[bool, str]:
    """Whether the provider answered one token, and the words for it."""
    from appliance.errors import PicoagentError
    from appliance.llm.cloud import ask_once

    try:
        return True, f"ok ({await ask_once(name, provider):.2f} s)"
    except PicoagentError as exc:
        return False, f"failed: {exc.message}"


def cmd_usage(args: argparse.Namespace) -> int:
    """Tokens and cost by day, provider and model."""
    config = load(args)
    db = open_db(config)
    try:
        rows, (today, month) = db.usage(max(1, args.days)), db.spent_usd()
    finally:
        db.close()
    budget = {
        "spent_today_usd": round(today, 6),
        "spent_month_usd": round(month, 6),
        "daily_budget_usd": config.routing.daily_budget_usd,
        "monthly_budget_usd": config.routing.monthly_budget_usd,
    }
    if args.json:
        print_json({"usage": rows, "budget": budget})
        return 0
    if not rows:
        print(f"no use in the last {args.days} days")
    else:
        print(
            f"{'day':10} {'provider':10} {'model':26} {'route':14} {'turns':>6} {'prompt':>9} {'reply':>8} {'cost':>9}"
        )
    for r in rows:
        print(
            f"{r['day']:10} {r['provider']:10} {r['model'][:26]:26} {r['route']:14} {r['turns']:6d}"
            f" {r['prompt_tokens']:9d} {r['completion_tokens']:8d} {'$' + format(r['cost_usd'], '.4f'):>9}"
        )
    if rows:
        print(
            "turns: answered by that model; a model that only tried (a cloud that failed, a local answer sent on"
            " to the cloud) adds its tokens and cost with 0 turns, so each turn counts once, as in `routing stats`"
        )
    print(
        f"cloud spent: ${today:.4f} today of ${config.routing.daily_budget_usd:g},"
        f" ${month:.4f} this month of ${config.routing.monthly_budget_usd:g}"
    )
    return 0


def cmd_routing_stats(args: argparse.Namespace) -> int:
    """How often messages were answered where, and why they went to the cloud or did not."""
    config = load(args)
    db = open_db(config)
    try:
        rows = db.routes(max(1, args.days))
    finally:
        db.close()
    total = sum(r["turns"] for r in rows)
    by_route: dict[str, int] = {}
    for r in rows:
        by_route[r["route"]] = by_route.get(r["route"], 0) + r["turns"]
    wanted = [r for r in rows if r["route"] == "cloud" or r["blocked"]]
    if args.json:
        print_json({"days": args.days, "turns": total, "by_route": by_route, "decisions": rows})
        return 0
    if not total:
        print(f"no turns in the last {args.days} days")
        return 0
    print(f"{total} turns in the last {args.days} days (routing.mode {config.routing.mode})")
    for route, n in sorted(by_route.items(), key=lambda item: -item[1]):
        print(f"  {route:15} {n:6d}  {100 * n / total:5.1f}%")
    if wanted:
        print("the cloud was wanted because (and, when it was not used, why not):")
        for r in wanted:
            outcome = "sent to the cloud" if r["route"] == "cloud" else f"kept on the Pi: {r['blocked']}"
            print(f"  {r['why']:15} {r['turns']:6d}  {outcome}")
    return 0


def _hard_bar() -> str:
    """ "a message scoring 0.65 or more (the difficulty score), ": edge_first's first signal, as shipped."""
    import json

    from appliance.understanding.difficulty import SHIPPED

    try:
        bar = float(json.loads(SHIPPED.read_text())["hard_above"])
    except (OSError, ValueError, KeyError):
        return ""
    return f"a message scoring {bar:g} or more on the difficulty score, "
