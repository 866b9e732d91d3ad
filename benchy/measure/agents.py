"""An agent trace's own figures, from its saved requests: per agent, per turn, per task.

An agent replay (load/agent_replay.py) saves each call with its agent (`conversation`), its
session, the task (`group`), its number within the agent (`turn`), the reuse an ideal cache
serves it (`expected_cached_tokens`) and its unique tail (`unique_tokens`). From those alone:

  agents   per agent: its calls, median TTFT, expected and served cached tokens, the calls
           served less than expected, its span (first send → last answer); the first agent of
           a task is its main agent, the others its sub-agents
  turns    per turn number (over all agents): calls, median TTFT, expected and served
  tasks    per task: end-to-end latency (first send → last answer of any of its agents), and
           tasks per minute over the replay (tasks finished ÷ the span from first send to last
           answer)
  lint     each call served less than expected (beyond the cache's granularity: a block, or 1%
           of a token-granular count) or more than prompt − unique: which call, agent, turn

Pure: the same saved results give the same figures; `benchy report` recomputes them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from benchy.measure import stats
from benchy.measure.workloads import LEAK_TOLERANCE, cache_granularity, reuse_verdicts
from benchy.records.plan import Tagged


@dataclass(frozen=True)
class AgentRow:
    agent: int
    task: int
    main: bool  # the task's first agent; False: a sub-agent
    calls: int
    failed: int
    ttft_s: float | None
    expected_tokens: int
    served_tokens: int | None  # None: the server reported no cached figure
    short_calls: int
    span_s: float | None


@dataclass(frozen=True)
class TurnRow:
    turn: int
    calls: int
    ttft_s: float | None
    expected_tokens: int
    served_tokens: int | None


@dataclass(frozen=True)
class LintRow:
    request_id: str
    agent: int
    task: int
    turn: int
    expected_tokens: int
    served_tokens: int
    prompt_tokens: int | None
    verdict: str  # "short" (less than expected) | "beyond unique" (more than prompt − unique)


@dataclass(frozen=True)
class AgentFigures:
    agents: list[AgentRow]
    turns: list[TurnRow]
    task_e2e_s: list[float]  # per finished task, in task order
    tasks_per_min: float | None
    lint: list[LintRow]
    # The short calls are exactly those whose history holds reasoning before the last user
    # message (and there are some): the chat template dropped earlier turns' reasoning.
    template_rewrote: bool = False
    # Short calls whose served prefix ends inside the history: beyond what calls expecting no
    # reuse were served (the template's head, a shared system prompt) and not where an earlier
    # call of the agent ended, as a replica or slot holding that call would serve it. A cache
    # that dropped part of the history (eviction) leaves this; routing does not.
    cut_inside: int = 0


def is_agent_replay(requests: Sequence[Tagged]) -> bool:
    """An agent trace's calls carry an agent and a task; a request trace's carry neither."""
    measured = [r for r in requests if not r.warmup]
    return bool(measured) and all(r.conversation is not None and r.group is not None for r in measured)


def figures(requests: Sequence[Tagged]) -> AgentFigures:
    calls = [r for r in requests if not r.warmup and r.conversation is not None and r.group is not None]
    ok = [r for r in calls if r.ok]
    short_of = {r.request_id for r, fine in reuse_verdicts(ok, cache_granularity(ok)) if not fine}
    lint = [row for r in ok if (row := _lint(r, r.request_id in short_of)) is not None]
    short = {row.request_id for row in lint if row.verdict == "short"}
    mains: dict[int, int] = {}
    for r in sorted(calls, key=lambda r: (r.group, r.conversation)):
        mains.setdefault(r.group or 0, r.conversation or 0)
    agents = []
    for agent, mine in sorted(_by(calls, "conversation").items()):  # grouped once: 10,000 agents
        task = mine[0].group or 0
        agents.append(
            AgentRow(
                agent,
                task,
                mains[task] == agent,
                len(mine),
                sum(not r.ok for r in mine),
                _median_ttft(mine),
                sum(r.expected_cached_tokens or 0 for r in mine if r.ok),
                _served(mine),
                sum(r.request_id in short for r in mine),
                _span(mine),
            )
        )
    turns = []
    for turn, mine in sorted(_by(calls, "turn").items()):
        expected = sum(r.expected_cached_tokens or 0 for r in mine if r.ok)
        turns.append(TurnRow(turn, len(mine), _median_ttft(mine), expected, _served(mine)))
    by_task = [mine for _, mine in sorted(_by(calls, "group").items())]
    spans = [_span(mine) for mine in by_task if all(r.ok for r in mine)]  # a task with a failed call: unfinished
    e2e = [s for s in spans if s is not None]
    whole = _span(calls)
    per_min = len(e2e) / (whole / 60) if whole and e2e else None
    rewritten = {r.request_id for r in ok if r.history_reasoning}
    inside = _cut_inside([r for r in ok if r.request_id in short], ok, cache_granularity(ok))
    return AgentFigures(agents, turns, e2e, per_min, lint, bool(short) and short == rewritten, inside)


CALL_END_SLACK = 8  # tokens past an earlier call's prompt a cache may hold (its answer's first words, a header)


def _cut_inside(short: list[Tagged], ok: list[Tagged], granularity: int) -> int:
    """How many short calls were served a prefix that ends inside their history (see cut_inside)."""
    base = max((r.cached_tokens or 0 for r in ok if not r.expected_cached_tokens), default=0)
    ends: dict[int, list[int]] = {}
    for r in ok:
        if r.prompt_tokens:
            ends.setdefault(r.conversation or 0, []).append(r.prompt_tokens)
    out = 0
    for r in short:
        served = r.cached_tokens or 0
        near_end = any(
            -granularity < served - end <= CALL_END_SLACK + granularity for end in ends.get(r.conversation or 0, [])
        )
        out += served > base + granularity and not near_end
    return out


def _by(records: Sequence[Tagged], field: str) -> dict[int, list[Tagged]]:
    """The records grouped by a field (agent, turn or task), in their order; None left out."""
    out: dict[int, list[Tagged]] = {}
    for r in records:
        key = getattr(r, field)
        if key is not None:
            out.setdefault(key, []).append(r)
    return out


def _lint(r: Tagged, short: bool) -> LintRow | None:
    """The call's verdict: served less than expected (measure/workloads.reuse_verdicts, the
    case's own judgement), or more than its prompt less its unique tail (as leakage is judged)."""
    served = r.cached_tokens or 0
    excess = served - ((r.prompt_tokens or 0) - (r.unique_tokens or 0))
    beyond = r.unique_tokens is not None and r.prompt_tokens is not None and r.cached_tokens is not None
    beyond = beyond and excess > max(1.0, LEAK_TOLERANCE * (r.unique_tokens or 0))
    if not short and not beyond:
        return None
    verdict = "short" if short else "beyond unique"
    expected = r.expected_cached_tokens or 0
    return LintRow(
        r.request_id, r.conversation or 0, r.group or 0, r.turn or 0, expected, served, r.prompt_tokens, verdict
    )


def _median_ttft(records: Sequence[Tagged]) -> float | None:
    values = [v for r in records if r.ok and (v := _ttft(r)) is not None]
    return stats.median(values) if values else None


def _ttft(r: Tagged) -> float | None:
    metrics = getattr(r, "metrics", None)  # a saved RequestResult: the analysis's own figure
    if isinstance(metrics, dict):
        value = metrics.get("ttft_s")
        return float(value) if isinstance(value, (int, float)) else None
    return None


def _served(records: Sequence[Tagged]) -> int | None:
    known = [r.cached_tokens for r in records if r.ok and r.cached_tokens is not None]
    return sum(known) if known else None


def _span(records: Sequence[Tagged]) -> float | None:
    ended = [r.sent_mono_s + r.end_s for r in records if r.end_s is not None]
    if not ended or len(ended) < len(records):
        return None  # a call never answered: the task did not finish
    return max(ended) - min(r.sent_mono_s for r in records)
