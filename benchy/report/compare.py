"""`benchy compare`: did a second deployment really differ from the first, case by case?

For every case both results files ran (same prompt and output length, concurrency, depth and
endpoint), and for e2e t/s, TTFT and decode t/s, on the per-request values of the measured,
successful requests:
  change      = median(B) − median(A), also as % of median(A)
  95% CI      = percentile bootstrap of median(B*) − median(A*), A and B resampled apart
  p           = two-sided Mann–Whitney U (default; exact for small samples) or Welch's t-test,
                then Benjamini–Hochberg-adjusted over the cases of each metric (so that comparing
                many cases does not flag chance differences: the false discovery rate stays ≤ alpha)
  verdict     = faster / slower when adjusted p < alpha, |change| ≥ min_effect and the 95% CI
                excludes 0; "not settled" when the test finds a difference but the CI of the
                medians' change holds 0 (the two disagree: no direction is claimed); "negligible"
                when adjusted p < alpha but the change is smaller; otherwise "no significant
                difference"; "too few requests" when the test could not reach p < alpha at best.
Reads saved results only. Results whose prompt nonce differs are not comparable (one may have
been served from a prefix cache): compare() refuses them unless forced.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from benchy.measure.registry import COMPARE_METRICS, METRICS
from benchy.measure.sanity import canary
from benchy.measure.sanity.canary import CanaryChange
from benchy.measure.stats import benjamini_hochberg, median_difference_ci, p_value, smallest_possible_p
from benchy.report import setup_diff
from benchy.results.types import CaseResult, MetricSummary, RunResult

TESTS = ("mannwhitney", "welch")
# Smallest change called faster/slower: repeated runs of one deployment drift by a percent or two
# (clocks, temperature, a busy client), which a test on many requests finds "significant".
MIN_EFFECT = 0.02

FASTER, SLOWER = "faster", "slower"
NO_DIFFERENCE = "no significant difference"
# The rank test found a difference, but the 95% interval of the change in medians still holds
# zero: the two say different things about the medians, so no direction is claimed (issue 54).
UNSETTLED = "not settled (its 95% interval holds 0)"
NEGLIGIBLE = "negligible"
CLIENT_DELAY = "within benchy's own delay"
TOO_FEW = "too few requests"
UNAVAILABLE = "n/a"


class CompareError(ValueError):
    """Results that cannot be compared; one line for the user."""


@dataclass
class MetricChange:
    case: str
    metric: str
    title: str
    verdict: str
    a_median: float | None = None
    b_median: float | None = None
    n_a: int = 0
    n_b: int = 0
    change: float | None = None
    change_pct: float | None = None
    ci95: list[float] | None = None  # of the change, in the metric's unit
    p_value: float | None = None  # the test's own
    p_adjusted: float | None = None  # Benjamini–Hochberg over this metric's cases; the verdict uses it
    reason: str = ""  # why there is no verdict (n/a, too few requests)
    caveats: list[str] = field(default_factory=list)  # warnings of either run that qualify this metric


@dataclass
class GpuChange:
    """One case's GPU figures in A and B (--gpu-metrics): one number per case, so no test."""

    case: str
    figure: str  # joules_per_token | marginal_joules_per_token | power_w | bandwidth_gbs
    a: float | None
    b: float | None
    change_pct: float | None = None


# The registered GPU metrics compared, each with its number format: (metric, format).
GPU_FIGURES = (
    (METRICS["gpu_joules_per_token"], ".3g"),
    (METRICS["gpu_marginal_joules_per_token"], ".3g"),
    (METRICS["gpu_power_w"], ",.0f"),
    (METRICS["gpu_bandwidth_gbs"], ",.0f"),
)


@dataclass
class Comparison:
    """B against the baseline A."""

    a_name: str
    b_name: str
    test: str
    alpha: float
    min_effect: float
    changes: list[MetricChange] = field(default_factory=list)
    only_in_a: list[str] = field(default_factory=list)
    only_in_b: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    setup_differences: list[tuple[str, str, str]] = field(default_factory=list)
    gpu: list[GpuChange] = field(default_factory=list)
    canary: list[CanaryChange] = field(default_factory=list)  # --canary in either run (sanity/canary.py)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# ------------------------------------------------------------------ matching and comparing


def case_key(case: CaseResult) -> tuple[Any, ...]:
    """What must agree for two cases to be the same measurement."""
    return (case.pp, case.tg, case.concurrency, case.rate, case.depth, case.depth_mode, case.endpoint)


def _key_but_endpoint(case: CaseResult) -> tuple[Any, ...]:
    return case_key(case)[:-1]


def _endpoints_across(a: RunResult, b: RunResult) -> tuple[str, str] | None:
    """(A's endpoint, B's) when each run measured one endpoint, not the same one, and they
    share cases but for it; else None (a run over several endpoints pairs them as they are)."""
    ends_a = {c.endpoint for c in a.cases}
    ends_b = {c.endpoint for c in b.cases}
    if len(ends_a) != 1 or len(ends_b) != 1 or ends_a == ends_b:
        return None
    (end_a,), (end_b,) = ends_a, ends_b
    if not {_key_but_endpoint(c) for c in a.cases} & {_key_but_endpoint(c) for c in b.cases}:
        return None
    return str(end_a), str(end_b)


def compare_metric(
    case_a: CaseResult,
    case_b: CaseResult,
    metric: str,
    title: str,
    test: str,
    alpha: float,
    names: tuple[str, str] = ("A", "B"),
) -> MetricChange:
    """Medians, change, CI and the raw p of one metric of one case; the verdict comes later,
    once p is adjusted across cases. The medians are the registered metric's summaries as each
    run saved them (the figures its own table printed); the per-request values feed the CI and
    the test."""
    out = MetricChange(case=case_a.label, metric=metric, title=title, verdict=UNAVAILABLE)
    summary_a, summary_b = case_summary(case_a, metric), case_summary(case_b, metric)
    if summary_a is None or summary_b is None:
        missing = [(name, c) for name, c in zip(names, (case_a, case_b)) if not case_summary(c, metric)]
        out.reason = "; ".join(f"{name}: {c.reason(metric).message}" for name, c in missing)
        return out
    a, b = case_a.measured_values(metric), case_b.measured_values(metric)
    out.n_a, out.n_b = len(a), len(b)
    out.a_median, out.b_median = summary_a.median, summary_b.median  # the metric's, as each run saved it
    out.change = out.b_median - out.a_median
    out.change_pct = 100.0 * out.change / out.a_median if out.a_median else None
    out.ci95 = median_difference_ci(a, b)
    if smallest_possible_p(len(a), len(b), test) >= alpha:
        out.verdict = TOO_FEW
        out.reason = (
            f"{len(a)} vs {len(b)} requests: the {describe_test(test)} cannot reach p < {alpha:g}; use more --runs"
        )
        return out
    out.p_value = p_value(a, b, test)
    return out


def client_delay_bound(a: tuple[RunResult, CaseResult], b: tuple[RunResult, CaseResult], metric: str) -> float | None:
    """How far (relative) benchy's own late timestamps could move this metric's median, where it
    fell behind in either case (client_overloaded): each stamp is late by at most the event loop's
    longest lag, which moves a time by that much and a rate by twice that over its decode span.
    None where benchy kept up in both."""
    behind = [c for run, c in (a, b) if any(w.code == "client_overloaded" and w.case == c.label for w in run.warnings)]
    lags = [c.client.loop_lag_ms_max for c in behind if c.client and c.client.loop_lag_ms_max is not None]
    if not behind:
        return None
    if not lags:
        return math.inf  # fell behind, by an unknown amount
    lag_s = max(lags) / 1000
    if METRICS[metric].is_time:
        medians = [s.median for _, c in (a, b) if (s := case_summary(c, metric))]
        return lag_s / min(medians) if medians and min(medians) > 0 else math.inf
    spans = [_rate_span(c, metric) for _, c in (a, b)]
    known = [s for s in spans if s]
    return 2 * lag_s / min(known) if known else math.inf


def _rate_span(case: CaseResult, metric: str) -> float | None:
    """The time a rate is taken over: send to end for e2e t/s, first to last arrival for decode."""
    e2e, ttft = case_summary(case, "e2e_s"), case_summary(case, "ttft_s")
    if e2e is None:
        return None
    return e2e.median - (ttft.median if ttft and metric == "decode_tps" else 0.0)


def _unless_client_delay(change: MetricChange, bound: float | None) -> None:
    """A faster/slower no larger than benchy's own delay could make is no verdict on the server."""
    if bound is None or change.verdict not in (FASTER, SLOWER) or change.change_pct is None:
        return
    if abs(change.change_pct) <= 100 * bound:
        change.verdict = CLIENT_DELAY
        change.reason = (
            f"benchy fell behind (client_overloaded): its own late timestamps could move this figure by "
            f"{'any amount' if math.isinf(bound) else f'{100 * bound:.0f}%'}, more than the {change.change_pct:+.1f}% measured"
        )


def case_summary(case: CaseResult, metric: str) -> MetricSummary | None:
    return case.summary.get(metric)


def verdict(change: MetricChange, higher_better: bool, alpha: float, min_effect: float) -> str:
    if change.p_adjusted is None or change.p_adjusted >= alpha:
        return NO_DIFFERENCE
    if change.change is None or change.change_pct is None or abs(change.change_pct) < 100.0 * min_effect:
        return NEGLIGIBLE
    if change.ci95 is not None and change.ci95[0] <= 0.0 <= change.ci95[1]:
        return UNSETTLED
    return FASTER if (change.change > 0) == higher_better else SLOWER


def describe_test(test: str) -> str:
    return "Welch t-test" if test == "welch" else "Mann–Whitney U test"


def setup_differences(a: RunResult, b: RunResult) -> list[tuple[str, str, str]]:
    """Every recorded setting that differs and can explain a change (report/setup_diff.py)."""
    return setup_diff.differences(a, b)


def comparability_warnings(a: RunResult, b: RunResult, a_name: str, b_name: str, force: bool) -> list[str]:
    """Raises CompareError for results that must not be compared (unless forced)."""
    out = []
    nonce_a, nonce_b = a.prompt_nonce, b.prompt_nonce
    if nonce_a != nonce_b:
        message = (
            f"prompt nonce differs ({a_name}: {_on_off(nonce_a)}, {b_name}: {_on_off(nonce_b)}): "
            "the run without it may have been served from the server's prefix cache, so its "
            "prefill and TTFT are not comparable"
        )
        if not force:
            raise CompareError(message + "; pass --allow-nonce-mismatch to compare anyway")
        out.append(f"NOT COMPARABLE: {message}.")
    elif nonce_a is False:
        out.append(
            "Neither run used the prompt nonce: prefix caching may have served both; prefill and "
            "TTFT figures may be inflated alike."
        )
    shared = _request_ids(a) & _request_ids(b)
    if shared:  # ids carry a random per-run salt: shared ids mean one run read twice (or a copy)
        out.append(
            f"SAME RUN: {a_name} and {b_name} hold the same requests ({len(shared)} request ids in "
            "common): every change below is zero by construction, not a sign that nothing changed. "
            "Compare two separate runs."
        )
    for name, results in ((a_name, a), (b_name, b)):
        if results.partial:
            out.append(f"{name} is a partial run (interrupted or stopped early).")
        if results.warnings:
            codes = sorted({w.code for w in results.warnings})
            count = len(results.warnings)
            out.append(f"{name} has {count} warning{'' if count == 1 else 's'} ({', '.join(codes)}); see its report.")
    return out


def _request_ids(results: RunResult) -> set[str]:
    return {r.request_id for case in results.cases for r in case.requests if r.request_id}


def _on_off(value: object) -> str:
    return "not recorded" if value is None else "on" if value else "off"


def compare(
    a: RunResult,
    b: RunResult,
    a_name: str = "A",
    b_name: str = "B",
    test: str = "mannwhitney",
    alpha: float = 0.05,
    min_effect: float = MIN_EFFECT,
    force: bool = False,
) -> Comparison:
    """B against A, per matching case. Raises CompareError when they cannot be compared."""
    if test not in TESTS:
        raise CompareError(f"unknown test {test!r} (choose from: {', '.join(TESTS)})")
    if not 0 < alpha < 1 or min_effect < 0:
        raise CompareError("alpha must be between 0 and 1, and the minimum effect ≥ 0")
    result = Comparison(a_name, b_name, test, alpha, min_effect)
    result.warnings = comparability_warnings(a, b, a_name, b_name, force)
    result.setup_differences = setup_differences(a, b)
    key = case_key
    across = _endpoints_across(a, b)
    if across:  # one endpoint each, a different one: the same cases over two APIs (issue 54)
        key = _key_but_endpoint
        result.warnings.append(
            f"{a_name} measured the {across[0]} endpoint, {b_name} {across[1]}: the same cases over "
            "two APIs, whose request shapes and server-side work differ; a change may be the endpoint's"
        )
    by_key_b = {key(c): c for c in b.cases}
    keys_a = {key(c) for c in a.cases}
    result.only_in_a = [c.label for c in a.cases if key(c) not in by_key_b]
    result.only_in_b = [c.label for c in b.cases if key(c) not in keys_a]
    pairs = [(c, by_key_b[key(c)]) for c in a.cases if key(c) in by_key_b]
    if not pairs:
        raise CompareError(
            f"{a_name} and {b_name} have no case in common (same prompt and output length, "
            "load, depth and endpoint); nothing to compare"
        )
    if result.only_in_a or result.only_in_b:
        result.warnings.append(_unmatched_warning(result))
    for m in COMPARE_METRICS:
        metric, title, higher_better = m.name, m.title, m.higher_is_better
        changes = [
            compare_metric(case_a, case_b, metric, title, test, alpha, (a_name, b_name)) for case_a, case_b in pairs
        ]
        for change, (_, case_b) in zip(changes, pairs):  # B's own label: another endpoint's differs
            change.caveats = qualifying_warnings(a, change.case, metric, a_name) + qualifying_warnings(
                b, case_b.label, metric, b_name
            )
        tested = [(c, c.p_value) for c in changes if c.p_value is not None]
        for (change, _), adjusted in zip(tested, benjamini_hochberg([p for _, p in tested])):
            change.p_adjusted = adjusted
            change.verdict = verdict(change, higher_better, alpha, min_effect)
        for change, (case_a, case_b) in zip(changes, pairs):
            _unless_client_delay(change, client_delay_bound((a, case_a), (b, case_b), metric))
        result.changes += changes
    order = {label: i for i, label in enumerate(c.label for c, _ in pairs)}
    result.changes.sort(key=lambda c: order[c.case])  # stable: metrics stay in registry order
    result.gpu = gpu_changes(pairs)
    result.canary = canary.changes(a.setup.canary, b.setup.canary)
    return result


def gpu_changes(pairs: list[tuple[CaseResult, CaseResult]]) -> list[GpuChange]:
    """The GPU figures of each matched case where either run sampled its GPUs."""
    out = []
    for a, b in pairs:
        if a.gpu is None and b.gpu is None:
            continue
        for metric, _ in GPU_FIGURES:
            name = metric.key
            va = getattr(a.gpu, name) if a.gpu else None
            vb = getattr(b.gpu, name) if b.gpu else None
            pct = 100 * (vb - va) / va if va and vb is not None else None
            out.append(GpuChange(a.label, name, va, vb, pct))
    return out


def qualifying_warnings(results: RunResult, case_label: str, metric: str, name: str) -> list[str]:
    """`code (run)` of each warning of this case that qualifies or withholds this metric."""
    return [
        f"{w.code} ({name})"
        for w in results.warnings
        if w.case == case_label and (metric in w.metrics or metric in w.withheld)
    ]


def _unmatched_warning(result: Comparison) -> str:
    parts = []
    if result.only_in_a:
        parts.append(f"only in {result.a_name}: {', '.join(result.only_in_a)}")
    if result.only_in_b:
        parts.append(f"only in {result.b_name}: {', '.join(result.only_in_b)}")
    return "CASES DO NOT MATCH; compared only the cases both ran (" + "; ".join(parts) + ")."


def run_names(paths: list[Path]) -> list[str]:
    """Short names for the report: a run folder's name for `DIR/results.json`, else the file stem."""
    names = [p.parent.name if p.name == "results.json" and p.parent.name else p.stem for p in paths]
    if len(set(names)) < len(names):
        names = [str(p) for p in paths]
    return names


def compare_files(paths: list[Path], **options: Any) -> list[Comparison]:
    """Every file after the first against the first. Raises ResultsError or CompareError."""
    from benchy.results import files as results_files

    if len(paths) < 2:
        raise CompareError("compare needs at least two results files")
    loaded = [results_files.read(p) for p in paths]
    names = run_names(paths)
    return [compare(loaded[0], other, names[0], name, **options) for other, name in zip(loaded[1:], names[1:])]


# ------------------------------------------------------------------ Markdown


def _number(value: float | None, scale: float, decimals: int) -> str:
    return "n/a" if value is None else f"{value * scale:,.{decimals}f}"


def _signed(value: float | None, scale: float, decimals: int) -> str:
    return "n/a" if value is None else f"{value * scale:+,.{decimals}f}"


def change_row(change: MetricChange) -> list[str]:
    scale, decimals = METRICS[change.metric].scale, METRICS[change.metric].decimals
    pct = f" ({change.change_pct:+.1f}%)" if change.change_pct is not None else ""
    ci = (
        f"{_signed(change.ci95[0], scale, decimals)} … {_signed(change.ci95[1], scale, decimals)}"
        if change.ci95
        else "n/a"
    )
    p = "n/a" if change.p_adjusted is None else _p_text(change.p_adjusted)
    shown = f"**{change.verdict}**" if change.verdict in (FASTER, SLOWER) else change.verdict
    if change.reason:
        shown += f" ({change.reason})"
    if change.caveats:
        shown += f"; qualified by {', '.join(change.caveats)}"
    return [
        change.case,
        change.title,
        f"{_number(change.a_median, scale, decimals)} (n={change.n_a})",
        f"{_number(change.b_median, scale, decimals)} (n={change.n_b})",
        _signed(change.change, scale, decimals) + pct,
        ci,
        p,
        shown,
    ]


def _p_text(p: float) -> str:
    return f"{p:.3f}" if p >= 0.001 else "<0.001"


def markdown(comparisons: list[Comparison], figure: str | None = None) -> str:
    from tabulate import tabulate

    parts = ["# benchy compare", ""]
    for comp in comparisons:
        parts += [f"## {comp.b_name} vs {comp.a_name}", ""]
        parts += [f"> **Warning:** {w}" for w in comp.warnings] + ([""] if comp.warnings else [])
        if comp.setup_differences:
            parts += ["| setup | " + comp.a_name + " | " + comp.b_name + " |", "|---|---|---|"]
            parts += [f"| {t} | {va} | {vb} |" for t, va, vb in comp.setup_differences] + [""]
        parts += summary_lines(comp) + [""]
        headers = [
            "test",
            "metric",
            f"{comp.a_name} median",
            f"{comp.b_name} median",
            "change",
            "95% CI of change",
            "p (adjusted)",
            "verdict",
        ]
        rows = [change_row(c) for c in comp.changes]
        parts += [tabulate(rows, headers=headers, tablefmt="pipe", disable_numparse=True), ""]
        parts += [method_note(comp), ""]
        parts += gpu_lines(comp)
        parts += canary.lines(comp.canary, comp.a_name, comp.b_name)
    if figure:
        parts += [f"![change per case]({figure})", ""]
    return "\n".join(parts)


def gpu_lines(comp: Comparison) -> list[str]:
    """The GPU figures side by side (one per case and run: a change, never a verdict)."""
    if not comp.gpu:
        return []
    titles = {metric.key: (metric.title, fmt) for metric, fmt in GPU_FIGURES}
    out = [
        "GPU figures (--gpu-metrics; one number per case and run, so no test; lower J/token is better):",
        "",
        f"| test | figure | {comp.a_name} | {comp.b_name} | change |",
        "|---|---|---|---|---|",
    ]
    for change in comp.gpu:
        title, fmt = titles[change.figure]
        a = "n/a" if change.a is None else format(change.a, fmt)
        b = "n/a" if change.b is None else format(change.b, fmt)
        pct = "n/a" if change.change_pct is None else f"{change.change_pct:+.1f}%"
        out.append(f"| {change.case} | {title} | {a} | {b} | {pct} |")
    return out + [""]


def summary_lines(comp: Comparison) -> list[str]:
    """Per metric, how many cases went each way: the answer before the table."""
    out = []
    for metric, title in ((m.name, m.title) for m in COMPARE_METRICS):
        counts: dict[str, int] = {}
        for change in comp.changes:
            if change.metric == metric:
                counts[change.verdict] = counts.get(change.verdict, 0) + 1
        total = sum(counts.values())
        text = "; ".join(
            f"{'**' + v + '**' if v in (FASTER, SLOWER) else v} in {n} of {total} cases"
            for v, n in sorted(counts.items(), key=lambda kv: -kv[1])
        )
        out.append(f"- {comp.b_name}, {title}: {text}")
    return out


def method_note(comp: Comparison) -> str:
    return (
        f"Each row compares the per-request values of one case ({comp.b_name} − {comp.a_name}; "
        f"for TTFT lower is faster). p: two-sided {describe_test(comp.test)}, adjusted (Benjamini–Hochberg) "
        "over the cases of each metric, so that testing many cases does not turn chance into "
        f"findings. 95% CI: bootstrap interval of the difference in medians. A row is "
        f"**faster**/**slower** when p < {comp.alpha:g} and the change is at least "
        f"{100 * comp.min_effect:g}% and its 95% CI excludes 0 (where the test finds a difference "
        "but the CI holds 0, the row says not settled: the two disagree on the medians; smaller "
        "significant changes are called negligible); "
        '"no significant difference" means these requests cannot tell the two apart, not that '
        "they are equal: the CI says how large a difference could still hide."
    )
