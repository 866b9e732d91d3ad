"""Which runner sends a case: the load generator, or a workload's own loop."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from benchy.loadgen import CaseIO, CasePlan


def runner_for(plan: CasePlan) -> Callable[[CasePlan, CaseIO], Awaitable[None]] | None:
    """The workload's own loop for this case, or None: the load generator sends it. A
    shared-prefix case is a cached-depth case of the load generator (one context per group); a
    conversation needs a dependent loop (the next turn waits for the answer); a trace leaves at
    its own times."""
    if plan.case.kind == "multi_turn":
        from benchy.workloads.multi_turn import run_conversations

        return run_conversations
    if plan.case.kind == "trace":
        from benchy.workloads.trace import replay

        return replay
    return None


def planned_requests(plan: CasePlan) -> int:
    """Requests a multi-turn or trace case sends (turns of every conversation; trace lines)."""
    from benchy.workloads import multi_turn, trace

    if plan.case.kind == "multi_turn":
        return multi_turn.planned_requests(plan)
    return len(trace.load(trace.spec_of(plan).path, trace.replay_limit(plan)))
