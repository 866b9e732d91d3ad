"""Which saved cases make a figure's points and lines, and how the caption words them: the
lightest load, one line per output length, a case's ceiling. Its own module because choosing the
series is reading saved results, not drawing: report/plots.py draws what this chooses, and none
of it needs matplotlib.
"""

from __future__ import annotations

from benchy.results.types import CaseResult


def case_ceiling_tps(case: CaseResult) -> float | None:
    """Single-stream decode ceiling (tok/s) of a case, as results.py stored it; None without one."""
    stored = case.ceiling.tokens_per_s if case.ceiling else None
    return float(stored) if stored else None


def is_open_loop(case: CaseResult) -> bool:
    return case.rate is not None


def _rate(case: CaseResult) -> float:
    """An open-loop case's arrival rate."""
    assert case.rate is not None
    return case.rate


def lightest_load_cases(cases: list[CaseResult]) -> tuple[list[CaseResult], str]:
    """The cases at the lightest load, and that load in words: closed loop at the lowest
    concurrency, else (an open-loop-only run) the lowest arrival rate."""
    closed = [c for c in cases if not is_open_loop(c)]
    if closed:
        lowest = min(c.concurrency or 1 for c in closed)
        return [c for c in closed if c.concurrency == lowest], f"concurrency {lowest}"
    lowest_rate = min(_rate(c) for c in cases)
    return [c for c in cases if c.rate == lowest_rate], f"{lowest_rate:g} requests/s (open loop)"


def depth_text(case: CaseResult) -> str:
    if not case.depth:
        return ""
    mode = f" {case.depth_mode}" if case.depth_mode else ""
    return f" @ depth {case.depth}{mode}"


def series_by_output(cases: list[CaseResult]) -> dict[str, list[CaseResult]]:
    """One line per output length (and context depth), its cases sorted by prompt length; the
    scenarios a line's points come from are named in its legend entry."""
    series: dict[str, list[CaseResult]] = {}
    for case in sorted(cases, key=lambda c: (c.depth, c.depth_mode or "", c.tg, c.pp)):
        series.setdefault(f"{case.tg} output tokens{depth_text(case)}", []).append(case)
    return {_with_scenarios(name, group): group for name, group in series.items()}


def _with_scenarios(name: str, cases: list[CaseResult]) -> str:
    scenarios = list(dict.fromkeys(c.scenario for c in cases if c.scenario))
    return f"{name} ({', '.join(scenarios)})" if scenarios else name


def output_lengths_meet(series: dict[str, list[CaseResult]]) -> bool:
    """Two series (output lengths) measured at one prompt length: only then can a TTFT that
    differs by output length be seen."""
    seen: dict[int, int] = {}
    for cases in series.values():
        for pp in {c.pp for c in cases}:
            seen[pp] = seen.get(pp, 0) + 1
    return any(count > 1 for count in seen.values())


def series_words(series: dict[str, list[CaseResult]]) -> str:
    if all(len(cases) == 1 for cases in series.values()):
        return "one point per case (each scenario has its own lengths: nothing was swept)"
    return "one line per output length"


def points_sentence(series: dict[str, list[CaseResult]]) -> str:
    alone = [name for name, cases in series.items() if len(cases) == 1]
    if not alone or len(alone) == len(series):
        return ""
    return " A lone point (no line) is one case: its output length was measured at one prompt length only."


def prompt_lengths(cases: list[CaseResult]) -> int:
    return len({c.pp for c in cases})
