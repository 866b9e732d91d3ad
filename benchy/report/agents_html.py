"""report.html's interactive figure of an agent replay (measure/agents.py's calls), from saved
results only: per agent, each call's TTFT and the cached tokens served against expected, by
the call's number within its agent."""

from __future__ import annotations

from benchy.jsontypes import JsonObject
from benchy.measure import agents
from benchy.report.agents_view import AGENTS_SHOWN
from benchy.report.html_figures import CACHE_CODES, Panel, _layout
from benchy.results.types import RequestResult, RunResult


def agent_panels(results: RunResult) -> list[Panel]:
    out = []
    for i, case in enumerate(c for c in results.cases if c.kind in ("trace", "multi_turn")):
        if not agents.is_agent_replay(case.requests):
            continue
        by_agent: dict[int, list[RequestResult]] = {}
        for r in case.requests:
            if not r.warmup and r.ok and r.turn is not None:
                by_agent.setdefault(r.conversation or 0, []).append(r)
        ttft: list[JsonObject] = []
        reuse: list[JsonObject] = []
        for agent in sorted(by_agent)[:AGENTS_SHOWN]:
            mine = sorted(by_agent[agent], key=lambda r: r.turn or 0)
            turns = [r.turn for r in mine]
            ms = [None if (t := r.metrics.get("ttft_s")) is None else t * 1000 for r in mine]
            ttft.append({"type": "scatter", "mode": "lines+markers", "name": f"agent {agent}", "x": turns, "y": ms,
                         "hovertemplate": f"agent {agent} turn %{{x}}<br>TTFT %{{y:.1f}} ms<extra></extra>"})  # fmt: skip
            reuse.append({"type": "scatter", "mode": "lines+markers", "name": f"agent {agent} served", "x": turns,
                          "y": [r.cached_tokens for r in mine],
                          "hovertemplate": f"agent {agent} turn %{{x}}<br>served %{{y:,}}<extra></extra>"})  # fmt: skip
            reuse.append({"type": "scatter", "mode": "markers", "name": f"agent {agent} expected", "x": turns,
                          "y": [r.expected_cached_tokens for r in mine], "marker": {"symbol": "x", "color": "grey"},
                          "showlegend": False,
                          "hovertemplate": f"agent {agent} turn %{{x}}<br>expected %{{y:,}}<extra></extra>"})  # fmt: skip
        if not ttft:
            continue
        drawn = "" if len(by_agent) <= AGENTS_SHOWN else f" The first {AGENTS_SHOWN} of {len(by_agent):,} agents."
        out.append(
            Panel(f"agents-ttft-{i}", f"Agents: TTFT by turn ({case.label})",
                  "Each line one agent (sub-agents included), each point a call." + drawn,
                  {"data": ttft, "layout": _layout("turn (call within its agent)", "TTFT ms")}, cases=[case.label],
                  metrics=("ttft_s", "turn_ttft_s"))
        )  # fmt: skip
        out.append(
            Panel(f"agents-reuse-{i}", f"Agents: cached tokens served vs expected ({case.label})",
                  "Lines: cached tokens the server reported for each call; grey crosses: the reuse expected "
                  "(the server's own count of the earlier call the history extends)." + drawn,
                  {"data": reuse, "layout": _layout("turn (call within its agent)", "cached tokens")}, cases=[case.label],
                  codes=CACHE_CODES)
        )  # fmt: skip
    return out
