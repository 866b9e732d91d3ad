"""report.md / report.html lines and a figure for an agent trace replay (measure/agents.py),
from saved results only: per agent, per turn, the tasks' end-to-end latency and rate, and the
trace lint (each call served other than expected) with the cause the case's finding supports."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

from benchy.measure import agents
from benchy.measure.workloads import WorkloadFigures
from benchy.results.types import CaseResult, RequestResult

LINT_SHOWN = 12  # calls listed; the rest counted
AGENTS_SHOWN = 24  # agents listed in the table and drawn; the rest summed up


def _ms(value: float | None) -> str:
    return f"{value * 1000:,.1f}" if value is not None else "n/a"


def _tokens(value: int | None) -> str:
    return f"{value:,}" if value is not None else "not reported"


def lines(case: CaseResult, figures: WorkloadFigures) -> list[str]:
    """The agent replay's sections (nothing for a request trace)."""
    if not agents.is_agent_replay(case.requests):
        return []
    fig = agents.figures(case.requests)
    out = ["", "#### Agents", ""]
    out += ["| agent | task | role | calls | failed | TTFT ms p50 | cached expected | cached served | short | span s |"]
    out += ["|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    for a in fig.agents[:AGENTS_SHOWN]:
        role = "main" if a.main else "sub-agent"
        span = f"{a.span_s:.2f}" if a.span_s is not None else "n/a"
        out.append(
            f"| {a.agent} | {a.task} | {role} | {a.calls} | {a.failed} | {_ms(a.ttft_s)} | "
            f"{a.expected_tokens:,} | {_tokens(a.served_tokens)} | {a.short_calls} | {span} |"
        )
    if len(fig.agents) > AGENTS_SHOWN:
        rest = fig.agents[AGENTS_SHOWN:]
        out.append(
            f"| … {len(rest):,} more agents | | {sum(not a.main for a in rest):,} sub-agents | {sum(a.calls for a in rest):,} | "
            f"{sum(a.failed for a in rest):,} | | {sum(a.expected_tokens for a in rest):,} | "
            f"{sum(a.served_tokens or 0 for a in rest):,} | {sum(a.short_calls for a in rest):,} | |"
        )
    out += ["", "#### Turns (a call's number within its agent)", ""]
    out += ["| turn | calls | TTFT ms p50 | cached expected | cached served |", "|---:|---:|---:|---:|---:|"]
    for t in fig.turns:
        out.append(f"| {t.turn} | {t.calls} | {_ms(t.ttft_s)} | {t.expected_tokens:,} | {_tokens(t.served_tokens)} |")
    out += ["", _task_line(fig), ""]
    out += lint_lines(fig, figures)
    return out


def _task_line(fig: agents.AgentFigures) -> str:
    if not fig.task_e2e_s:
        return "No task finished (each had a failed call): no end-to-end latency."
    e2e = sorted(fig.task_e2e_s)
    rate = f"{fig.tasks_per_min:,.1f}" if fig.tasks_per_min is not None else "n/a"
    return (
        f"Tasks: {len(e2e)} finished; end-to-end (first call sent → last answer of any of its agents) "
        f"median {e2e[len(e2e) // 2]:.2f} s, longest {e2e[-1]:.2f} s; {rate} tasks a minute over the replay."
    )


def _expiry(figures: WorkloadFigures) -> bool:
    return bool(
        (figures.partial_reuse and figures.partial_reuse.cause == "expiry")
        or (figures.no_reuse and figures.no_reuse.cause == "expiry")
    )


def cause(figures: WorkloadFigures) -> str:
    """What the case's evidence says of calls served less than expected."""
    if figures.partial_reuse and figures.partial_reuse.cause == "expiry":
        return "expiry: the misses all came after longer idle gaps than any hit (a cache lifetime)"
    if figures.partial_reuse and figures.partial_reuse.cause in ("routing", "rotation"):
        return f"routing over replicas: {figures.partial_reuse.pattern}"
    if figures.partial_reuse:
        return "partial reuse with no pattern the evidence settles (see the warning)"
    if figures.no_reuse:
        return "no reuse at all" + (
            ": expiry (idle gaps)" if figures.no_reuse.cause == "expiry" else ": cache off or not reporting"
        )
    if figures.eviction:
        return "eviction: reuse worked, then fell short as the histories grew"
    return "no pattern: isolated calls"


def lint_lines(fig: agents.AgentFigures, figures: WorkloadFigures) -> list[str]:
    if not fig.lint:
        return [
            "Trace lint: every call was served the reuse expected (within the cache's granularity), none beyond its unique tail.",
            "",
        ]
    short = [row for row in fig.lint if row.verdict == "short"]
    out = [
        f"Trace lint: {len(short)} calls served less than expected, {len(fig.lint) - len(short)} beyond their unique tail."
    ]
    if short and fig.template_rewrote:
        out.append(
            "Cause the evidence supports: a chat template that rewrites history: the calls served short "
            "are exactly those whose history holds reasoning before the last user message, which a "
            "template keeping only the last turn's reasoning (Qwen3, DeepSeek-R1) drops."
        )
    elif short and fig.cut_inside * 3 >= len(short) and not _expiry(figures):  # routing never cuts inside
        out.append(
            f"Cause the evidence supports: eviction: {fig.cut_inside} of the {len(short)} calls were served a "
            "prefix that ends inside their history, neither a miss nor where an earlier call ended (as a "
            "replica or slot holding that call would serve): the cache dropped part of what it held."
        )
    elif short:
        out.append(f"Cause the evidence supports: {cause(figures)}.")
    out += [
        "",
        "| request | agent | task | turn | expected | served | prompt | verdict |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for row in fig.lint[:LINT_SHOWN]:
        prompt = f"{row.prompt_tokens:,}" if row.prompt_tokens is not None else "n/a"
        out.append(
            f"| {row.request_id} | {row.agent} | {row.task} | {row.turn} | {row.expected_tokens:,} | "
            f"{row.served_tokens:,} | {prompt} | {row.verdict} |"
        )
    if len(fig.lint) > LINT_SHOWN:
        out.append(f"| … {len(fig.lint) - LINT_SHOWN} more |  |  |  |  |  |  |  |")
    return out + [""]


def figure(plots: ModuleType, case: CaseResult, path: Path) -> Any:
    """Per agent: TTFT by turn (left) and cached tokens served against expected by turn (right),
    as a plots.Figure (the module is passed in: importing it would close a circle), or None."""
    if not agents.is_agent_replay(case.requests):
        return None
    calls = [r for r in case.requests if not r.warmup and r.ok and r.turn is not None]
    if not calls:
        return None
    by_agent: dict[int, list[RequestResult]] = {}
    for r in calls:
        by_agent.setdefault(r.conversation or 0, []).append(r)
    fig, (left, right) = plots.plt.subplots(1, 2, figsize=plots.WIDE)
    for agent in sorted(by_agent)[:AGENTS_SHOWN]:
        mine = sorted(by_agent[agent], key=lambda r: r.turn or 0)
        turns = [r.turn for r in mine]
        ttft = [r.metrics.get("ttft_s") for r in mine]
        left.plot(
            turns, [v * 1000 if v is not None else float("nan") for v in ttft], marker="o", label=f"agent {agent}"
        )
        right.plot(turns, [r.cached_tokens or 0 for r in mine], marker="o")
        right.plot(turns, [r.expected_cached_tokens or 0 for r in mine], marker="x", linestyle="--", color="grey")
    for ax in (left, right):
        ax.xaxis.get_major_locator().set_params(integer=True)
    left.set_xlabel("turn (call within its agent)")
    left.set_ylabel("TTFT ms")
    left.set_title("TTFT by turn, per agent")
    left.legend(fontsize=7)
    right.set_xlabel("turn (call within its agent)")
    right.set_ylabel("cached tokens")
    right.set_title("Served (dots) vs expected (grey crosses)")
    drawn = "" if len(by_agent) <= AGENTS_SHOWN else f" (the first {AGENTS_SHOWN} of {len(by_agent):,} agents)"
    caption = (
        f"Each line one agent of the replayed trace, sub-agents included{drawn}. Left: each call's TTFT. "
        "Right: the cached tokens the server reported for each call, and the grey crosses the reuse "
        "expected (the server's own count of the earlier call the history extends)."
    )
    return plots.Figure(f"Agents: {case.label}", plots.save(fig, path), caption)  # plots' own: no import circle
