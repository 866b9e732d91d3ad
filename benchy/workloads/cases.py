"""Workload cases from flags or a scenario table, checked before anything is sent.

multi_turn: one case per (pp, tg, concurrency): concurrency conversations of `turns` turns.
shared_prefix: per (pp, tg, concurrency), one case per shared fraction, always with fraction 0
(the same lengths with nothing shared), the baseline each gain is measured against; a shared
case is a cached-depth case with `groups` contexts (the prefixes) and pp − prefix unique tokens.
trace: one case per trace file.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

from benchy.workloads.case import POOLING_ENDPOINTS, Case, ScenarioError
from benchy.workloads.spec import MultiTurn, SharedPrefix, ThinkTime, TraceReplay, WorkloadError


def multi_turn_cases(
    pp: list[int],
    tg: list[int],
    concurrency: list[int],
    turns: int,
    think: ThinkTime = ThinkTime(),
    first_tokens: int | None = None,
    keep_reasoning: bool = False,
    cold_baseline: bool = False,
    scenario: str | None = None,
    endpoint: str | None = None,
    subagents: int = 0,
) -> list[Case]:
    _at_least("turns", [turns], 1)
    if subagents and (turns < 2 or cold_baseline or keep_reasoning):
        raise ScenarioError(
            "--subagents forks child agents between turns: it needs --turns 2 or more, without "
            "--cold-baseline or --keep-reasoning (the history is the agents' own)"
        )
    _at_least("--pp (tokens of each user message)", pp, 9)  # a nonce is 8 tokens
    _at_least("--tg", tg, 1)
    _at_least("conversations (--concurrency)", concurrency, 1)
    if first_tokens is not None:
        _at_least("first_tokens", [first_tokens], 9)
    spec = MultiTurn(turns, think, first_tokens, keep_reasoning, cold_baseline, subagents)
    return [
        Case(pp=p, tg=t, concurrency=c, scenario=scenario, endpoint=endpoint, workload=spec, runs=1)
        for p, t, c in itertools.product(pp, tg, concurrency)
    ]


def shared_prefix_cases(
    pp: list[int],
    tg: list[int],
    concurrency: list[int],
    fractions: list[float],
    groups: int = 1,
    scenario: str | None = None,
    runs: int | None = None,
    endpoint: str | None = None,
) -> list[Case]:
    bad = [f for f in fractions if not _is_fraction(f)]
    if bad:
        raise ScenarioError(f"shared fractions must be numbers in [0, 1), got {bad[0]!r}")
    _at_least("groups", [groups], 1)
    _at_least("--pp", pp, 1)
    _at_least("--tg", tg, 1)
    _at_least("--concurrency", concurrency, 1)
    cases = []
    for p, t, c in itertools.product(pp, tg, concurrency):
        for f in sorted({0.0, *map(float, fractions)}):
            spec = SharedPrefix(fraction=f, groups=groups if f else 1)
            prefix, suffix = spec.split(p)
            if f and (prefix < 1 or suffix < 9):
                raise ScenarioError(
                    f"shared fraction {f:g} of a {p}-token prompt leaves {prefix} shared and {suffix} "
                    "unique tokens: the unique part needs at least 9 (its nonce is 8)"
                )
            depth_mode = "cached" if prefix and f else "cold"
            cases.append(
                Case(
                    pp=suffix if f else p,
                    tg=t,
                    concurrency=c,
                    depth=prefix if f else 0,
                    depth_mode=depth_mode,
                    scenario=scenario,
                    runs=runs,
                    endpoint=endpoint,
                    workload=spec,
                )
            )
    return cases


def trace_case(
    path: str, speed: float = 1.0, limit: int | None = None, scenario: str | None = None, max_gap_s: float | None = None
) -> Case:
    if not (isinstance(speed, (int, float)) and not isinstance(speed, bool) and 0 < speed < math.inf):
        raise ScenarioError(f"trace speed must be a positive number, got {speed!r}")
    if limit is not None:
        _at_least("max_requests", [limit], 1)
    from benchy.workloads import agent_trace, trace

    try:
        agent = agent_trace.is_agent_trace(path)
        # a bad file fails here, before the server is contacted
        agent_trace.load(path) if agent else trace.load(path, limit)
        if max_gap_s is not None and not agent:
            raise ScenarioError(
                "--max-gap caps an agent trace's idle gaps: a request trace keeps its own times (--speed)"
            )
    except WorkloadError as exc:
        raise ScenarioError(str(exc)) from None
    return Case(
        pp=0,
        tg=0,
        scenario=scenario,
        workload=TraceReplay(path=path, speed=float(speed), limit=limit, max_gap_s=max_gap_s),
        runs=1,
    )


def check_workload_endpoints(cases: list[Case], endpoint: str) -> None:
    """ValueError for a multi-turn case on /v1/completions: only a chat template renders a
    history (chat, responses and messages all send the conversation as messages)."""
    pooling = [
        c.endpoint or endpoint for c in cases if c.kind != "sweep" and (c.endpoint or endpoint) in POOLING_ENDPOINTS
    ]
    if pooling:
        raise ValueError(
            f"--endpoint {pooling[0]} sends plain inputs of --pp tokens (--batch N a request): "
            "no workload, dataset or trace (docs/embeddings.md)"
        )
    if any(
        c.dataset and c.dataset.images and (c.endpoint or endpoint) not in ("chat", "responses", "messages")
        for c in cases
    ):
        raise ValueError("a dataset with images needs --endpoint chat, responses or messages: only those take an image")
    if any(c.kind == "multi_turn" and (c.endpoint or endpoint) == "completions" for c in cases):
        raise ValueError(
            "--turns needs --endpoint chat, responses or messages: the server's chat template renders the history "
            "(a multi_turn case)"
        )
    if any(_agentic(c) and (c.endpoint or endpoint) == "completions" for c in cases):
        raise ValueError(
            "an agent trace and --subagents send tool calls and their results as a history: use --endpoint chat, "
            "responses or messages"
        )


def _agentic(case: Case) -> bool:
    """An agent trace's replay or sub-agent conversations: tool calls in the history."""
    from benchy.workloads import agent_trace

    if isinstance(case.workload, TraceReplay):
        return agent_trace.is_agent_trace(case.workload.path)
    return isinstance(case.workload, MultiTurn) and case.workload.subagents > 0


def _is_fraction(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value < 1


def _at_least(name: str, values: Sequence[object], low: int) -> None:
    bad = [v for v in values if not isinstance(v, int) or isinstance(v, bool) or v < low]
    if bad:
        raise ScenarioError(f"{name} must be whole numbers ≥ {low}, got {bad[0]!r}")
