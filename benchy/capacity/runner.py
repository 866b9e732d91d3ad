"""Runs a capacity search against a server: each probe of search.py is one `benchy run` of the
searched case at that load (run.py's execute, so every request is measured, recorded and checked
exactly as `benchy run` does), and capacity.json is saved after every round, so an interrupted
search keeps what it measured.

A round's goodput comes from its results' Goodput (the --slo verdict of each measured request,
failed ones counted as not good); a round whose results carry a `client_overloaded` warning is
kept but not counted (search.py says why).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from benchy import __version__
from benchy import run as run_mod
from benchy.analysis.bundle import BundleError
from benchy.capacity import search as search_mod
from benchy.capacity.bundle import (
    CapacityBundleError,
    CapacityManifest,
    MeasuredRound,
    SearchPlan,
    is_capacity_folder,
    read_manifest,
    write_manifest,
)
from benchy.capacity.search import BY_RATE, Answer, Observation, Probe, Search, SearchSettings
from benchy.client.redact import redact_url
from benchy.client.settings import ClientSettings
from benchy.load.plan import LoadSettings
from benchy.load.prompts import Template
from benchy.measure import registry
from benchy.measure.slo import meets_slo
from benchy.measure.unavailable import Unavailable
from benchy.results import files as results_files
from benchy.results.capacity import (
    CapacityAnswer,
    CapacityPoint,
    CapacityResult,
    CapacityRound,
    CapacitySetup,
    load_text,
    save,
    share_text,
)
from benchy.results.types import CaseResult, MetricSummary, RequestResult, RunResult, Stopped
from benchy.workloads.case import Case

NOT_TIMED = "no counted round in which benchy kept up"
UNJUDGED = "unjudged"  # a request whose SLO figure is null
ROUNDS_DIR = "rounds"  # each round's results.json and requests.jsonl, under -o


class CapacityError(Exception):
    """The search cannot go on (the SLO cannot be judged); one line."""


@dataclass
class CapacitySettings:
    client: ClientSettings
    case: Case  # the case searched; its concurrency or rate is what the search sets
    search: SearchSettings
    load: LoadSettings  # --slo (required), --workers, --seed …; requests set per round
    endpoint: str = "chat"
    warmup: int = 1
    template: Template = field(default_factory=Template)
    stop: tuple[str, ...] = ()
    server_metrics: bool = True
    output_dir: Path | None = None
    command_line: str = ""
    announce: Callable[[str], None] | None = None  # the banner and one line per round, on stderr


@dataclass
class _Progress:
    """What the search has measured so far: the rounds' results per load, for the figures (a
    CapacityResult is made of them, once each time one is saved)."""

    setup: CapacitySetup  # the model and server filled in from the first round (_with_identity)
    benchy_version: str | None
    cases: dict[float, list[CaseResult]] = field(default_factory=dict)  # the counted rounds'
    timed: dict[float, list[CaseResult]] = field(default_factory=dict)  # of them, those in which benchy kept up
    rounds: dict[float, list[CapacityRound]] = field(default_factory=dict)


def case_at(case: Case, by: str, load: float) -> Case:
    """The searched case at one load: `load` requests in flight, or arriving per second."""
    if by == BY_RATE:
        return dataclasses.replace(case, concurrency=1, rate=load)
    return dataclasses.replace(case, concurrency=int(load), rate=None)


def search(settings: CapacitySettings) -> CapacityResult:
    """The whole search; returns capacity.json's content (also saved in output_dir, beside the
    bundle a rebuild remakes it from: capacity-manifest.json and the rounds' folders)."""
    finder = Search(settings.search)
    setup = _setup(settings)
    progress = _Progress(setup, __version__)
    # the setup as planned: _with_identity gives the progress's a model and server, not the manifest's
    manifest = CapacityManifest(setup, search=SearchPlan.of(settings.search), slo=_slo(settings))
    _save_manifest(settings, manifest)
    try:
        while (probe := finder.next_probe()) is not None:
            n_round = _rounds_done(progress)
            results = _measure(settings, probe, n_round)
            where = _round_where(settings, n_round, probe.load)
            if where is not None:
                manifest.rounds.append(MeasuredRound(probe.load, where))
                _save_manifest(settings, manifest)
            stopped = _record(settings.search, manifest.slo, settings.announce, finder, progress, probe, results, where)
            _save(settings, progress, finder)
            if stopped is not None:
                return _end(settings, manifest, progress, finder, stopped, partial=True)
    except KeyboardInterrupt:
        manifest.stopped = Stopped("SIGINT", "interrupted (Ctrl-C)")
        return _end(settings, manifest, progress, finder, manifest.stopped, partial=True)
    except run_mod.NothingMeasured as exc:
        manifest.stopped = Stopped("SIGINT", str(exc))
        return _end(settings, manifest, progress, finder, manifest.stopped, partial=True)
    return _end(settings, manifest, progress, finder, None, partial=False)


def _slo(settings: CapacitySettings) -> dict[str, float]:
    return dict(settings.load.slo or {})


def _end(
    settings: CapacitySettings,
    manifest: CapacityManifest,
    progress: _Progress,
    finder: Search,
    stopped: Stopped | None,
    partial: bool,
) -> CapacityResult:
    manifest.finished = True
    _save_manifest(settings, manifest)
    result = _finish(settings.search, progress, finder, partial, stopped)
    if settings.output_dir is not None:
        save(result, settings.output_dir)
    return result


def _save_manifest(settings: CapacitySettings, manifest: CapacityManifest) -> None:
    if settings.output_dir is not None:
        write_manifest(manifest, settings.output_dir)


def replay(directory: Path) -> CapacityResult:
    """capacity.json's content made again from a capacity folder's bundle alone: every round's
    saved results (made again from its own bundle where results.json is missing) through the
    same search and figures, in the order they were measured. CapacityBundleError (one line)
    when the folder has no manifest or a round's folder cannot be read."""
    manifest = read_manifest(directory)
    s = manifest.search.settings()
    finder = Search(s)
    progress = _Progress(manifest.setup, manifest.setup.benchy_version)
    stopped = manifest.stopped
    for rnd in manifest.rounds:
        probe = finder.next_probe()
        if probe is None or probe.load != rnd.load:
            went = "ended" if probe is None else f"went to {probe.load:g}"
            raise CapacityBundleError(f"{rnd.folder}: measured at {rnd.load:g} where the search {went}: not its round")
        results = _round_results(Path(directory) / rnd.folder)
        if (by_round := _record(s, manifest.slo, None, finder, progress, probe, results, rnd.folder)) is not None:
            stopped = by_round
            break
    if stopped is None and not manifest.finished:
        stopped = Stopped("killed", "the search's process ended before it saved: rebuilt from its rounds")
    return _finish(s, progress, finder, stopped is not None, stopped)


def rebuild_folder(directory: Path, report: bool = True) -> Path | None:
    """`benchy rebuild` of a capacity folder: capacity.json (and its report) made again from the
    bundle; returns capacity.json's path, or None when `directory` is not a capacity folder."""
    if not is_capacity_folder(directory):
        return None
    result = replay(directory)
    path = save(result, Path(directory))
    if report:
        from benchy.report import capacity as capacity_report

        capacity_report.write(result, Path(directory))
    return path


def _round_results(folder: Path) -> RunResult:
    try:
        return results_files.read(folder / "results.json")
    except results_files.ResultsError:
        try:
            return run_mod.rebuild(folder, report=False)
        except (BundleError, OSError) as exc:
            raise CapacityBundleError(f"{folder}: a round that cannot be read ({exc})") from None


def _rounds_done(progress: _Progress) -> int:
    return sum(len(r) for r in progress.rounds.values())


def _measure(settings: CapacitySettings, probe: Probe, n_round: int) -> RunResult:
    case = case_at(settings.case, settings.search.by, probe.load)
    folder = _round_folder(settings, n_round, case)
    run_settings = run_mod.RunSettings(
        client=settings.client,
        cases=[case],
        runs=1,
        warmup=settings.warmup,
        endpoint=settings.endpoint,
        output_dir=folder,
        command_line=settings.command_line,
        progress=False,
        template=settings.template,
        stop=settings.stop,
        load=dataclasses.replace(settings.load, requests=probe.requests, duration_s=None),
        server_metrics=settings.server_metrics,
        announce=settings.announce if n_round == 0 else None,
        report=False,  # a round's results.json is kept; the search's own report is capacity.md
    )
    return run_mod.execute(run_settings)


def _round_folder(settings: CapacitySettings, n_round: int, case: Case) -> Path | None:
    if settings.output_dir is None:
        return None
    slug = re.sub(r"[^A-Za-z0-9.]+", "-", case.label).strip("-")
    return settings.output_dir / ROUNDS_DIR / f"{n_round + 1:02d}-{slug}"


def _record(
    s: SearchSettings,
    slo: dict[str, float],
    announce: Callable[[str], None] | None,
    finder: Search,
    progress: _Progress,
    probe: Probe,
    results: RunResult,
    where: str | None,
) -> Stopped | None:
    """Hands the round to the search; returns why the search must stop (a stopped run)."""
    case = results.cases[0] if results.cases else None
    progress.setup = _with_identity(progress.setup, results)
    seen = _observation(case, results)
    late_but_passed = passed_despite_client_delay(slo, s.target, seen)
    finder.record(probe.load, dataclasses.replace(seen, overloaded=None) if late_but_passed else seen)
    counted = (seen.overloaded is None or late_but_passed) and seen.requests > 0
    rnd = CapacityRound(seen.requests, seen.good, counted, seen.overloaded, where)
    progress.rounds.setdefault(probe.load, []).append(rnd)
    if case is not None and rnd.counted:
        progress.cases.setdefault(probe.load, []).append(case)
        if not late_but_passed:  # a late client's times are not the server's
            progress.timed.setdefault(probe.load, []).append(case)
    if announce:
        announce(_round_line(s, finder, probe.load, rnd))
    if results.stopped is not None:
        return results.stopped
    return None


def _round_where(settings: CapacitySettings, n_round: int, load: float) -> str | None:
    """The round's folder, relative to the search's (None without -o)."""
    folder = _round_folder(settings, n_round, case_at(settings.case, settings.search.by, load))
    return str(folder.relative_to(settings.output_dir)) if folder and settings.output_dir else None


def _with_identity(setup: CapacitySetup, results: RunResult) -> CapacitySetup:
    """The setup with the model and server, as the first round's results name them."""
    if setup.model is not None:
        return setup
    named = results.setup
    return dataclasses.replace(setup, model=named.model, server_version=named.server_version, server=named.server)


def _observation(case: CaseResult | None, results: RunResult) -> Observation:
    if case is None:
        return Observation(0, 0, None)
    n = case.n_ok + case.n_failed
    goodput = case.goodput
    if goodput is None or goodput.fraction is None:
        why = goodput.unavailable if goodput else "no --slo"
        raise CapacityError(f"cannot judge the SLO at {case.label}: {why}")
    overloaded = next((w.message for w in results.warnings if w.code == "client_overloaded"), None)
    return Observation(n, round(goodput.fraction * n), overloaded)


def passed_despite_client_delay(slo: dict[str, float], target: float, seen: Observation) -> bool:
    """A round in which benchy fell behind still proves a pass when every SLO figure is one a late
    timestamp can only worsen (TTFT, latency, e2e rate): what was measured in time was delivered in
    time. Its failures may be benchy's own, so a round that leans fail stays uncounted."""
    if seen.overloaded is None or not seen.requests or not slo:
        return False
    only_worsens = all(registry.METRICS[name].late_only_worsens for name in slo)
    return only_worsens and seen.good >= target * seen.requests


def _round_line(s: SearchSettings, finder: Search, load: float, rnd: CapacityRound) -> str:
    point = finder.points[load]
    name = load_text(s.by, load)
    if not rnd.counted:
        return f"capacity: {name}: round not counted: benchy fell behind ({rnd.overloaded})"
    low, high = point.interval(s) or (0.0, 0.0)
    verdict = point.verdict(s)
    late = " (benchy fell behind, but a late client only worsens these figures: the pass counts)"
    share = "n/a" if point.goodput is None else share_text(point.goodput, s.target)
    return (
        f"capacity: {name}: {point.good}/{point.requests} within SLO ({share}, "
        f"{s.confidence:.0%} interval {low:.0%}–{high:.0%}): {verdict}" + (late if rnd.overloaded else "")
    )


def _save(settings: CapacitySettings, progress: _Progress, finder: Search) -> None:
    """capacity.json as the search stands after a round (partial: its answer is not final)."""
    if settings.output_dir is not None:
        save(_result(settings.search, progress, finder, partial=True), settings.output_dir)


def _finish(
    s: SearchSettings, progress: _Progress, finder: Search, partial: bool, stopped: Stopped | None
) -> CapacityResult:
    return _result(s, progress, finder, partial, stopped, noted=True)


def _result(
    s: SearchSettings,
    progress: _Progress,
    finder: Search,
    partial: bool,
    stopped: Stopped | None = None,
    noted: bool = False,
) -> CapacityResult:
    """capacity.json's content, made once from the rounds so far: the points, then the answer
    in words, then (`noted`: the search's end) the notes on what the answer assumed."""
    points = [_point(s, finder, progress, load) for load in finder.order]
    answer = _answer(s, finder, points, partial, stopped)
    return CapacityResult(
        benchy_version=progress.benchy_version,
        partial=partial,
        stopped=stopped,
        setup=progress.setup,
        answer=answer,
        points=points,
        notes=_notes(s, answer, points) if noted else [],
    )


# ------------------------------------------------------------------ the saved figures


def _point(s: SearchSettings, finder: Search, progress: _Progress, load: float) -> CapacityPoint:
    seen = finder.points[load]
    cases = progress.cases.get(load, [])
    timed = progress.timed.get(load, [])
    verdict = seen.verdict(s)
    unavailable: dict[str, str] = {}
    ttft, itl, e2e = (_pooled(timed, metric, unavailable) for metric in ("ttft_s", "itl_s", "e2e_s"))
    per_user = _pooled(timed, "decode_tps", unavailable)
    return CapacityPoint(
        load=load,
        label=_label(cases, load, s.by),
        verdict="pass" if seen.leans_pass(s) else "fail",
        clear=verdict != search_mod.UNDECIDED,
        requests=seen.requests,
        good=seen.good,
        goodput=seen.goodput,
        interval=seen.interval(s),
        rounds=list(progress.rounds.get(load, [])),  # a copy: the search goes on adding rounds
        ttft=ttft,
        itl=itl,
        e2e=e2e,
        throughput_tps=_weighted_throughput(timed),
        per_user_tps=per_user.median if per_user else None,
        cache_hit=_cache_hit(cases),
        start_misses=sum(_start_misses(c, int(load)) for c in cases) if s.by != BY_RATE and cases else None,
        unavailable=unavailable,
    )


def _label(cases: list[CaseResult], load: float, by: str) -> str:
    return cases[0].label if cases else load_text(by, load)


def _pooled(cases: list[CaseResult], metric: str, unavailable: dict[str, str]) -> MetricSummary | None:
    values = [v for c in cases for v in c.measured_values(metric)]
    if values:
        return MetricSummary.of(values)
    why = next((c.unavailable[metric] for c in cases if metric in c.unavailable), NOT_TIMED)
    unavailable[metric] = why
    return None


def _weighted_throughput(cases: list[CaseResult]) -> float | None:
    pairs = [(c.aggregate_tps, c.n_ok + c.n_failed) for c in cases if c.aggregate_tps is not None]
    total = sum(n for _, n in pairs)
    return sum(tps * n for tps, n in pairs) / total if total else None


def _start_misses(case: CaseResult, streams: int) -> int:
    """Requests missing the SLO among the round's first `streams`, which left together."""
    slo = case.goodput.slo if case.goodput else {}
    first = sorted((r for r in case.requests if not r.warmup), key=lambda r: r.index)[:streams]
    return sum(not _met(r, slo) for r in first)


def _met(req: RequestResult, slo: dict[str, float]) -> bool:
    if not req.ok:
        return False
    values = {k: Unavailable(UNJUDGED, "no value") if v is None else v for k, v in req.metrics.items()}
    return meets_slo(values, slo) is True


def _cache_hit(cases: list[CaseResult]) -> float | None:
    done = [r for c in cases for r in c.measured_ok() if r.prompt_tokens and r.cached_tokens is not None]
    prompt = sum(r.prompt_tokens or 0 for r in done)
    return sum(r.cached_tokens or 0 for r in done) / prompt if prompt else None


# ------------------------------------------------------------------ the answer in words


def _answer(
    s: SearchSettings, finder: Search, points: list[CapacityPoint], partial: bool, stopped: Stopped | None
) -> CapacityAnswer:
    found = finder.answer()
    line = answer_line(s, found, points, partial, stopped)
    return CapacityAnswer(found.kind, found.capacity, found.failing, found.confident, found.client_limited_at, line)


def answer_line(
    s: SearchSettings, answer: Answer, points: list[CapacityPoint], partial: bool, stopped: Stopped | None
) -> str:
    """The one line on stdout, e.g. `capacity: concurrency 12 (13 fails: 84% within SLO)`."""
    failing = next((p for p in points if p.load == answer.failing), None)
    fails = f"{share_text(failing.goodput, s.target)} within SLO" if failing and failing.goodput is not None else ""
    unsure = "" if answer.confident else "; not clear of the target after --max-requests: uncertain"
    if partial and stopped is not None:
        unsure += f"; stopped early: {stopped.reason}"
    if answer.kind == search_mod.FOUND:
        short = load_text(s.by, answer.failing).split(" ", 1)[1]
        return f"capacity: {load_text(s.by, answer.capacity)} ({short} fails: {fails}{unsure})"
    if answer.kind == search_mod.ALL_PASS:
        return (
            f"capacity: at least {load_text(s.by, answer.capacity)}: every point passed up to the limit "
            f"you allowed (--max {s.limit:g}){unsure}"
        )
    if answer.kind == search_mod.NONE_PASS:
        return f"capacity: none: even {load_text(s.by, answer.failing)} fails ({fails}{unsure})"
    at = load_text(s.by, answer.client_limited_at)
    below = f"at least {load_text(s.by, answer.capacity)}" if answer.capacity is not None else "unknown"
    return (
        f"capacity: {below}: benchy itself fell behind at {at}, which is no evidence about the server "
        f"(spread the load with --workers, or run benchy on another machine){unsure}"
    )


def _notes(s: SearchSettings, answer: CapacityAnswer, points: list[CapacityPoint]) -> list[str]:
    """Loads that passed above a failing one: goodput was assumed to fall with load."""
    if answer.failing is None:
        return []
    above = [p for p in points if p.load > answer.failing and p.verdict == "pass"]
    return [
        f"{load_text(s.by, p.load)} passed ({p.goodput:.0%}) above the failing {load_text(s.by, answer.failing)}: "
        "goodput did not fall steadily with load here, so the answer is the lowest failure's"
        for p in above
    ]


def _setup(settings: CapacitySettings) -> CapacitySetup:
    case, s = settings.case, settings.search
    return CapacitySetup(
        base_url=redact_url(settings.client.base_url),
        endpoint=case.endpoint or settings.endpoint,
        benchy_version=__version__,
        command_line=settings.command_line,
        started_utc=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        case=case_at(case, s.by, s.start).label,
        kind=case.kind,
        pp=case.pp,
        tg=case.tg,
        depth=case.depth,
        workload=case.workload.spec() if case.workload is not None else None,
        by=s.by,
        slo=dict(settings.load.slo or {}),
        goodput=s.target,
        confidence=s.confidence,
        interval=s.method,
        start=s.start,
        limit=s.limit,
        min_requests=s.min_requests,
        max_requests=s.max_requests,
        resolution=s.resolution if s.by == BY_RATE else None,
    )
