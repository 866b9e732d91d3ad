"""A whole benchmark run: connect, calibrate, send every case, save results as they come.

Flow: cases → CasePlan (loadgen) → records (appended to requests.jsonl as each finishes) →
results (metrics + stats) → checks → results.json. Interrupted runs keep what they measured:
Ctrl-C (SIGINT) and SIGTERM cancel the run's task, and results.json is saved with `partial: true`
and `stopped: {by, reason}`; so does --max-errors / --max-error-rate: the record that passes
a limit sets the run's stop event (loadgen ends the case, workers.py its processes), and no
later case starts.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import platform
import secrets
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from benchy import __version__, checks, metrics, server_metrics
from benchy import results as results_mod
from benchy import server as server_mod
from benchy.ceiling import CeilingInputs
from benchy.client import Client, ClientSettings, ServerError, redact_url, scrub, secrets_of
from benchy.loadgen import CasePlan, LoadSettings, run_case
from benchy.monitor import LoopMonitor
from benchy.progress import Progress
from benchy.prompts import Calibration, PromptError, PromptFactory, Template, calibrate, check_length
from benchy.records import RecordWriter, RequestRecord
from benchy.scenario import Case
from benchy.workers import WorkerError, WorkerPool, case_workers


@dataclass
class RunSettings:
    client: ClientSettings
    cases: list[Case]
    runs: int = 5
    warmup: int = 1
    endpoint: str = "chat"
    nonce: bool = True
    output_dir: Path | None = None
    command_line: str = ""
    progress: bool | None = None  # None: only when stderr is a terminal
    max_errors: int | None = None  # stop once more requests than this have failed
    max_error_rate: float | None = None  # stop once more than this fraction has failed
    ceiling: CeilingInputs = field(default_factory=CeilingInputs)
    template: Template = field(default_factory=Template)  # --template, --reasoning-effort
    stop: tuple[str, ...] = ()  # --stop, sent with every measured request
    load: LoadSettings = field(default_factory=lambda: LoadSettings())  # --requests, --rate … (issue 9)
    server_metrics: bool = True  # scrape /metrics around each case (--no-server-metrics: off)
    announce: Callable[[str], None] | None = None  # gets the one-line start banner


@dataclass
class RunState:
    """What a run has gathered so far; survives an interruption."""

    setup: dict = field(default_factory=dict)
    records: list[RequestRecord] = field(default_factory=list)
    plans: list[CasePlan] = field(default_factory=list)
    interrupted: bool = False
    stopped: dict | None = None  # {"by": "SIGINT" | "SIGTERM" | "max-errors" | "max-error-rate", "reason"}
    n_failed: int = 0
    client: dict = field(default_factory=dict)  # case label → LoopMonitor figures
    server: dict = field(default_factory=dict)  # case label → the server's figures, or why there are none


def execute(settings: RunSettings) -> dict:
    """Runs the benchmark; returns the results (also saved under output_dir). Raises
    ServerError when the server cannot be used at all."""
    state = RunState()
    writer = RecordWriter(settings.output_dir / "requests.jsonl" if settings.output_dir else None)
    try:
        asyncio.run(_execute(settings, state, writer))
    except KeyboardInterrupt:
        state.interrupted = True
        state.stopped = {"by": "SIGINT", "reason": "interrupted (Ctrl-C)"}
    except asyncio.CancelledError:  # what _stop_on_sigterm does to the run's task
        state.interrupted = True
    except ServerError as exc:  # the last guard on secrets: nothing the server echoed leaks
        raise ServerError(scrub(str(exc), secrets_of(settings.client))) from None
    finally:
        writer.close()
    if not state.setup:
        raise KeyboardInterrupt  # interrupted before anything was measured: nothing to save
    return finish(state, settings)


MIN_REQUESTS_FOR_RATE = 10  # --max-error-rate is judged from this many finished requests on


def error_limit_passed(state: RunState, settings: RunSettings) -> dict | None:
    """{by, reason} once --max-errors or --max-error-rate is passed (more errors than allowed,
    not as many); None while the run may go on."""
    failed, done = state.n_failed, len(state.records)
    if settings.max_errors is not None and failed > settings.max_errors:
        return {"by": "max-errors", "reason": f"{failed} requests failed, more than --max-errors {settings.max_errors}"}
    rate = settings.max_error_rate
    if rate is not None and done >= MIN_REQUESTS_FOR_RATE and failed > rate * done:
        return {
            "by": "max-error-rate",
            "reason": f"{failed} of {done} requests failed ({failed / done:.0%}), more than --max-error-rate {rate:g}",
        }
    return None


def _stop_on_sigterm(state: RunState) -> None:
    """SIGTERM ends the run as Ctrl-C does: the task is cancelled, what was measured is kept."""
    task = asyncio.current_task()

    def on_sigterm() -> None:
        state.stopped = {"by": "SIGTERM", "reason": "terminated (SIGTERM)"}
        if task is not None:
            task.cancel()

    try:
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, on_sigterm)
    except (ValueError, RuntimeError, NotImplementedError):
        pass  # not the main thread (or no signals here): the default action stays


def finish(state: RunState, settings: RunSettings) -> dict:
    results = build_results(state)
    if settings.output_dir is not None:
        results_mod.save(results, settings.output_dir)
    return results


def build_results(state: RunState) -> dict:
    by_case: dict[str, list[RequestRecord]] = {}
    for rec in state.records:
        by_case.setdefault(rec.case, []).append(rec)
    slo = state.setup.get("load", {}).get("slo")
    cases = [
        results_mod.case_result(
            p.case,
            p.endpoint,
            p.runs,
            by_case[p.case.label],
            slo,
            client=state.client.get(p.case.label),
            server=state.server.get(p.case.label),
        )
        for p in state.plans
        if p.case.label in by_case
    ]
    partial = state.interrupted or state.stopped is not None or len(cases) < len(state.plans)
    run = results_mod.run_result(state.setup, cases, partial, state.stopped, __version__)
    run.warnings = checks.check(run)  # after every metric; checks only read
    return run.to_dict()


async def _execute(settings: RunSettings, state: RunState, writer: RecordWriter) -> None:
    max_concurrency = max(settings.load.streams(c) for c in settings.cases)
    client_settings = replace(settings.client, connections=max_concurrency)
    _stop_on_sigterm(state)
    async with Client(client_settings) as client:
        model = await client.choose_model()
        salt = secrets.token_hex(6)
        endpoints = sorted({c.endpoint or settings.endpoint for c in settings.cases})
        identity = await server_mod.identify(client.session, client.base, model)
        scraper, metrics_status = await _metrics_scraper(client, model, settings.server_metrics)
        if settings.announce:
            settings.announce(_banner(identity, settings, metrics_status))
        calibrations = {ep: await calibrate(client, ep, salt, settings.template) for ep in endpoints}
        for ep, longest in _longest_prompts(settings).items():
            calibrations[ep] = await check_length(client, ep, calibrations[ep], salt, longest, settings.template)
        state.setup = _setup(settings, model, _version_text(identity), calibrations)
        state.setup["server"] = identity.to_dict()
        state.setup["server_metrics"] = metrics_status.to_dict()
        state.setup["calibration_failures"] = client.calibration_failures
        state.plans = [
            CasePlan(
                case=c,
                index=i,
                runs=c.runs or settings.runs,
                warmup=settings.warmup,
                endpoint=c.endpoint or settings.endpoint,
                salt=salt,
                template=settings.template,
                stop=settings.stop,
                **_load_plan(settings.load),
            )
            for i, c in enumerate(settings.cases)
        ]
        progress = Progress(sum(p.measured + p.warmup for p in state.plans), settings.progress)
        stop = asyncio.Event()  # set once an error limit is passed: the run ends

        def on_record(rec: RequestRecord) -> None:
            state.records.append(rec)
            writer.write(rec)
            progress.request_done()
            state.n_failed += not metrics.classify(rec).ok  # counted as results.json counts it
            passed = None if stop.is_set() else error_limit_passed(state, settings)
            if passed:
                state.stopped = passed
                stop.set()

        pools: list[WorkerPool] = []  # started at the first case that needs several processes
        try:
            for plan in state.plans:
                if stop.is_set():
                    break
                progress.start_case(plan.case.label)
                window = scraper.window() if scraper else None
                try:
                    await _run_one_case(
                        state, settings, client, plan, calibrations, salt, pools, on_record, stop, window
                    )
                except BaseException:
                    if window is not None:  # a stopped run saves at once: no last scrape
                        window.abort()
                        state.server[plan.case.label] = {"unavailable": window.result}
                    raise
                if window is not None:
                    await _close_window(state, plan.case.label, window, cut_short=stop.is_set())
        finally:
            progress.finish()
            for pool in pools:
                pool.close()


async def _run_one_case(state, settings, client, plan, calibrations, salt, pools, on_record, stop, window) -> None:
    """One case, in this process or in worker processes; the server's window opens once the
    warmups are done, so its figures cover the measured requests only."""

    async def start() -> float:
        if window is not None:
            await window.open()
        return time.perf_counter()

    k = case_workers(plan.case, settings.load.workers, settings.load.max_inflight)
    if k > 1:
        state.client[plan.case.label] = await _run_in_workers(
            pools, plan, k, client.settings, calibrations[plan.endpoint], settings.nonce, on_record, stop, start
        )
        return
    factory = PromptFactory(calibrations[plan.endpoint], nonce=settings.nonce, salt=f"{salt}c{plan.index}")
    async with LoopMonitor() as monitor:
        await run_case(client, plan, factory, on_record, start, stop=stop)
    state.client[plan.case.label] = {
        **monitor.figures(_in_flight(state.records, plan.case.label)),
        "workers": 1,
    }


async def _metrics_scraper(
    client: Client, model: str, wanted: bool
) -> tuple[server_metrics.MetricsScraper | None, server_metrics.MetricsStatus]:
    url = f"{server_mod.root_url(client.base)}/metrics"
    if not wanted:
        return None, server_metrics.MetricsStatus(url, False, reason="turned off with --no-server-metrics")
    scraper = server_metrics.MetricsScraper(client.session, url, model)
    status = await scraper.probe()
    return (scraper if status.available else None), status


async def _close_window(state: RunState, label: str, window: server_metrics.Window, cut_short: bool) -> None:
    """The case's last snapshot, once the server has counted its measured requests; none when
    an error limit cut the case short (requests cancelled in flight blur the server's count)."""
    if cut_short:
        window.abort()
    else:
        window.expected_requests = sum(1 for r in state.records if r.case == label and not r.warmup and r.ok)
        await window.close()
    result = window.result
    state.server[label] = result.to_dict() if not isinstance(result, str) else {"unavailable": result}


def _version_text(identity: server_mod.ServerIdentity) -> str | None:
    """setup.server_version as before issue 17: one line, e.g. 'vLLM 0.11.0'."""
    known = identity.engine or identity.version or identity.build or identity.server_header
    return identity.engine_version if known else None


def _banner(identity: server_mod.ServerIdentity, settings: RunSettings, status: server_metrics.MetricsStatus) -> str:
    where = redact_url(settings.client.base_url)
    note = f"server metrics: {status.engine}" if status.available else "no server metrics"
    return server_mod.banner(identity, where, str(settings.output_dir) if settings.output_dir else None, note)


def _longest_prompts(settings: RunSettings) -> dict[str, int]:
    """Endpoint → the longest prompt (depth + pp) any case sends there."""
    longest: dict[str, int] = {}
    for case in settings.cases:
        ep = case.endpoint or settings.endpoint
        longest[ep] = max(longest.get(ep, 0), case.depth + case.pp)
    return longest


def _load_plan(load: LoadSettings) -> dict:
    return {
        "requests": load.requests,
        "duration_s": load.duration_s,
        "max_inflight": load.max_inflight,
        "seed": load.seed,
    }


async def _run_in_workers(
    pools: list[WorkerPool],
    plan: CasePlan,
    k: int,
    client_settings: ClientSettings,
    calibration: Calibration,
    nonce: bool,
    on_record,
    stop: asyncio.Event,
    on_start=None,
) -> dict:
    """The case on k worker processes (workers.py); returns their merged monitor figures."""
    if pools and pools[0].n < k:
        pools.pop().close()
    if not pools:
        pools.append(WorkerPool(k, client_settings).start())
    try:
        return await pools[0].run_case(plan, k, calibration, nonce, on_record, stop, on_start)
    except WorkerError as exc:
        pools.clear()  # run_case killed it
        if exc.kind == "PromptError":
            raise PromptError(str(exc)) from None
        raise ServerError(f"a worker process failed: {exc.kind}: {exc}") from None


def _setup(settings: RunSettings, model: str, version: str | None, calibrations: dict[str, Calibration]) -> dict:
    main_cal = calibrations.get(settings.endpoint) or next(iter(calibrations.values()))
    return {
        "base_url": redact_url(settings.client.base_url),
        "model": model,
        "server_version": version,
        "endpoint": settings.endpoint,
        "benchy_version": __version__,
        "host": platform.node(),
        "python": platform.python_version(),
        "command_line": settings.command_line,
        "started_utc": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "prompt_nonce": settings.nonce,
        "runs": settings.runs,
        "warmup": settings.warmup,
        "calibration": main_cal.to_dict(),
        "calibrations": {ep: c.to_dict() for ep, c in calibrations.items()},
        "tokenizer": "o200k_base (offline), calibrated to the server's usage counts",
        "load": settings.load.to_dict(),
        **_ceiling_setup(settings.ceiling, model),
        **_template_setup(settings),
    }


def _template_setup(settings: RunSettings) -> dict:
    """template, reasoning_effort, stop and the stops that fire inside a Harmony response."""
    risky = settings.template.risky_stops(settings.stop)
    return {
        "template": settings.template.name,
        "reasoning_effort": settings.template.reasoning_effort,
        "stop": list(settings.stop),
        "dangerous_stops": [{"stop": stop, "reason": reason} for stop, reason in risky],
    }


def _ceiling_setup(inputs: CeilingInputs, model: str) -> dict:
    """hardware, model_profile and the figures the decode ceiling is computed from (the model
    profile is guessed from the served id only when a bandwidth is known)."""
    ceiling = inputs.resolve(model)
    if ceiling is None:
        return {}
    return {"hardware": ceiling.hardware, "model_profile": ceiling.model_profile, "ceiling": ceiling.to_dict()}


def _in_flight(records: list[RequestRecord], label: str) -> list[tuple[float, float]]:
    return [(r.sent_mono_s, r.sent_mono_s + (r.end_s or 0.0)) for r in records if r.case == label]
