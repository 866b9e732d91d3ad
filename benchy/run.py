"""A whole benchmark run: connect, calibrate, send every case, save results as they come.

Flow: cases → CasePlan (loadgen) → records (appended to requests.jsonl as each finishes, with
manifest.json beside it: the bundle, analysis/bundle.py) → analysis (analysis/analyze.py: the
same that `benchy rebuild` runs on the bundle) → results.json and the report. Interrupted runs
keep what they measured: Ctrl-C (SIGINT) and SIGTERM cancel the run's task, and results.json is
saved with `partial: true` and `stopped: {by, reason}`; so does --max-errors /
--max-error-rate: the record that passes a limit sets the run's stop event (loadgen ends the
case, workers.py its processes), and no later case starts. A killed run leaves its bundle:
`benchy rebuild` makes its results.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import signal
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from benchy.analysis import analyze as analysis
from benchy.analysis.analyze import REQUESTS
from benchy.analysis.bundle import CaseWindows, Manifest, PlannedCase, write_manifest
from benchy.client import loop as event_loop
from benchy.client.client import Client
from benchy.client.errors import ServerError
from benchy.client.redact import redact_url, scrub
from benchy.client.settings import ClientSettings, secrets_of
from benchy.load import canary, dataset_fit, image_host
from benchy.load.alone import alone_requests, send_alone
from benchy.load.context_fit import refuse_too_long, unfit_cases
from benchy.load.dataset_load import bind as bind_dataset
from benchy.load.dataset_load import calibrate_text
from benchy.load.dataset_load import setup as dataset_setup
from benchy.load.generator import run_case
from benchy.load.handoff import frozen_heap
from benchy.load.lengths import FileTokenizer, TokenCounter, best_counter, fit_words
from benchy.load.monitor import LoopMonitor
from benchy.load.plan import CasePlan, LoadSettings
from benchy.load.pools import CasePool, start_pool, worker_failures
from benchy.load.progress import Progress
from benchy.load.prompts import Calibration, PromptFactory, Template, calibrate, check_length
from benchy.load.sink import ErrorLimits, RecordSink
from benchy.load.tokenize import ServerTokenize, count_answers
from benchy.load.workers import LOCAL_CLOCK, client_figures, worker_entry
from benchy.measure.ceiling import CeilingInputs
from benchy.measure.health import ClientHealth
from benchy.records import RecordWriter
from benchy.results import types as results_mod
from benchy.run_setup import run_setup
from benchy.server import cache_reset
from benchy.server import gpu as gpu_mod
from benchy.server import identity as server_mod
from benchy.server import metrics as server_metrics
from benchy.server import window as server_window
from benchy.server_facts import ServerFacts, metrics_scraper, version_text
from benchy.workloads.case import Case


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
    progress: bool | None = None  # None: a bar on a terminal, plain lines elsewhere; False: none
    max_errors: int | None = None  # stop once more requests than this have failed
    max_error_rate: float | None = None  # stop once more than this fraction has failed
    max_connect_failures: int = 3  # stop after this many requests in a row could not connect; 0: never
    ceiling: CeilingInputs = field(default_factory=CeilingInputs)
    template: Template = field(default_factory=Template)  # --template, --reasoning-effort
    stop: tuple[str, ...] = ()  # --stop, sent with every measured request
    load: LoadSettings = field(default_factory=lambda: LoadSettings())  # --requests, --rate … (issue 9)
    server_metrics: bool = True  # scrape /metrics around each case (--no-server-metrics: off)
    replicas: tuple[str, ...] = ()  # --replica: the root URLs behind a router, each one's /metrics scraped
    gpu_metrics: str | None = None  # --gpu-metrics: a dcgm-exporter URL or "nvml" (server/gpu.py)
    cache_reset: bool = False  # --cache-reset: empty the server's prefix cache before each case
    tokenizer: str | None = None  # --tokenizer: the model's tokenizer.json (or its folder), for exact lengths
    announce: Callable[[str], None] | None = None  # gets the one-line start banner
    report: bool = True  # with output_dir: report.md, figures and results.csv beside results.json
    skip_unfit: bool = False  # --skip-unfit: run the cases whose prompt fits the context, list the rest
    canary: bool = False  # --canary: fixed prompts with checkable answers before the sweep (sanity/canary.py)

    @property
    def limits(self) -> ErrorLimits:
        return ErrorLimits(self.max_errors, self.max_error_rate, self.max_connect_failures, self.client.reconnect_s)


@dataclass
class RunState:
    """What a run has gathered so far; survives an interruption."""

    # typed once the calibrate phase ends (None before: nothing measured, nothing to save); each
    # later phase makes it anew with what it learnt (the dataset's sampling, a cache reset)
    setup: results_mod.Setup | None = None
    # where the finished records go (load/sink.py): it tallies each case (the records are
    # written to the bundle and let go; the results are made from the bundle) and judges the limits
    sink: RecordSink | None = None
    bundle_dir: Path | None = None  # where manifest.json and requests.jsonl are written
    plans: list[CasePlan] = field(default_factory=list)
    interrupted: bool = False
    stopped: results_mod.Stopped | None = None  # by SIGINT | SIGTERM | error (the sink's limits: its own)
    skipped: list[results_mod.NotMeasured] = field(default_factory=list)  # --skip-unfit's cases
    client: dict[str, ClientHealth] = field(default_factory=dict)  # case label → benchy's own health
    server: dict[str, server_metrics.ServerCaseMetrics | server_metrics.NoServerFigures] = field(
        default_factory=dict
    )  # case label → the server's figures, or why there are none
    gpu: dict[str, Any] = field(default_factory=dict)  # case label → GpuCase (--gpu-metrics)
    cache_resets: dict[str, cache_reset.CacheReset] = field(
        default_factory=dict
    )  # case label → its --cache-reset outcome
    phase: str = "connecting to the server"  # what an interruption cut short, before the cases
    started: list[str] = field(default_factory=list)  # labels of the cases begun, in order
    planned: list[PlannedCase] = field(default_factory=list)  # the plans as the manifest keeps them


def execute(settings: RunSettings) -> results_mod.RunResult:
    """Runs the benchmark; returns the typed results, also saved under output_dir with their
    report (report.md, figures, results.csv) when settings.report. Raises ServerError when the
    server cannot be used at all."""
    state = RunState()
    with _bundle_folder(settings.output_dir) as bundle_dir:
        state.bundle_dir = bundle_dir
        writer = RecordWriter(bundle_dir / REQUESTS)
        try:
            event_loop.run(_execute(settings, state, writer))
        except KeyboardInterrupt:
            state.interrupted = True
            state.stopped = results_mod.Stopped("SIGINT", "interrupted (Ctrl-C)")
        except asyncio.CancelledError:  # what _stop_on_sigterm does to the run's task
            state.interrupted = True
        except ServerError as exc:  # the last guard on secrets: nothing the server echoed leaks
            message = scrub(str(exc), secrets_of(settings.client))
            _ended_by_error(state, message)
            raise ServerError(message) from None
        except Exception as exc:  # a bad prompt, a lost worker …: raised on, the bundle says so
            _ended_by_error(state, scrub(f"{type(exc).__name__}: {exc}", secrets_of(settings.client)))
            raise
        finally:
            if state.setup is not None:  # results will be saved: their log beside them, even with no record in it
                writer.start()
            writer.close()
        if state.setup is None:  # stopped before the first case: nothing measured, nothing to save
            how = state.stopped.reason if state.stopped is not None else "interrupted"
            raise NothingMeasured(f"{how} while {state.phase}: nothing was measured or saved")
        return finish(state, settings)


def _ended_by_error(state: RunState, message: str) -> None:
    """A run that ends by an error saves no results; its bundle says why it ended (a rebuild
    names it), not that it was killed."""
    state.stopped = results_mod.Stopped("error", message)
    save_manifest(state)


@contextlib.contextmanager
def _bundle_folder(output_dir: Path | None) -> Iterator[Path]:
    """The run folder, or, for a run that saves none, a temporary one: every run's results are
    made from its bundle, by the one analysis (a long case's rows spill into it, as files that
    are already unlinked: removing the folder leaves them readable while the results live)."""
    if output_dir is not None:
        yield output_dir
        return
    with tempfile.TemporaryDirectory(prefix="benchy-bundle-") as where:
        yield Path(where)


def manifest_of(state: RunState, finished: bool = False) -> Manifest:
    """What the run has gathered besides its records, typed (analysis/bundle.py); once its setup is."""
    assert state.setup is not None  # save_manifest and finish come after the calibrate phase
    labels = dict.fromkeys([*state.started, *state.cache_resets, *state.client, *state.server, *state.gpu])
    windows = {}
    for label in labels:
        windows[label] = CaseWindows(
            client=state.client.get(label),
            server=state.server.get(label),
            gpu=state.gpu.get(label),
            cache_reset=state.cache_resets.get(label),
        )
    return Manifest(
        setup=state.setup,
        cases=state.planned,
        started=list(state.started),
        skipped=list(state.skipped),
        windows={label: w for label, w in windows.items() if w != CaseWindows()},
        interrupted=state.interrupted,
        stopped=_stopped(state),
        finished=finished,
    )


def _stopped(state: RunState) -> results_mod.Stopped | None:
    """Why the run stopped: a signal or an error, else an error limit its sink judged passed
    (load/sink.py words it: the load stage may not import the results' Stopped)."""
    passed = state.sink.stopped if state.sink is not None else None
    return state.stopped or (results_mod.Stopped(**passed) if passed else None)


def save_manifest(state: RunState, finished: bool = False) -> None:
    """Rewrites the bundle's manifest.json."""
    if state.bundle_dir is not None and state.setup is not None:
        write_manifest(manifest_of(state, finished), state.bundle_dir)


class NothingMeasured(Exception):
    """The run was stopped before its first case began (while connecting or calibrating)."""


def _stop_on_sigterm(state: RunState) -> None:
    """SIGTERM ends the run as Ctrl-C does: the task is cancelled, what was measured is kept."""
    task = asyncio.current_task()

    def on_sigterm() -> None:
        state.stopped = results_mod.Stopped("SIGTERM", "terminated (SIGTERM)")
        if task is not None:
            task.cancel()

    try:
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, on_sigterm)
    except (ValueError, RuntimeError, NotImplementedError):
        pass  # not the main thread (or no signals here): the default action stays


def finish(state: RunState, settings: RunSettings) -> results_mod.RunResult:
    """Completes the manifest, then analyses the bundle on disk as `benchy rebuild` does (one
    path), saves and reports the results."""
    assert state.bundle_dir is not None  # execute sets it first
    save_manifest(state, finished=True)
    built = analysis.analyze(analysis.Bundle.read(state.bundle_dir))
    return publish(built, settings.output_dir, settings.report)


def publish(built: results_mod.RunResult, output_dir: Path | None, report: bool = True) -> results_mod.RunResult:
    """Saves results.json (and the report) of an analysed run; returns it (frozen: built once).
    The analysis builds what results.json reads back (tests/test_analysis_form.py), so a report
    made now and `benchy report` later are the same; the requests are written a row at a time,
    so memory stays flat in the run's length."""
    results = built
    if output_dir is not None:
        from benchy.report import exporters  # matplotlib is imported only when a figure is drawn

        exporters.RESULTS_JSON.export(built, output_dir)  # a request at a time
        if report:
            exporters.export(results, output_dir, exporters.REPORT_EXPORTERS)
    return results


async def _execute(settings: RunSettings, state: RunState, writer: RecordWriter) -> None:
    max_concurrency = max(settings.load.streams(c) for c in settings.cases)
    client_settings = replace(settings.client, connections=max_concurrency)
    _stop_on_sigterm(state)
    host, shown = image_host.start(settings.load.images)  # --image-url: the images served on 127.0.0.1
    settings = replace(settings, load=replace(settings.load, images=shown))
    pool = start_pool(settings.load, settings.cases)  # its workers start up while this process calibrates
    try:
        await _measure(settings, state, writer, client_settings, pool)
    finally:
        if pool is not None:
            pool.close()
        if host is not None:
            host.close()


async def _measure(
    settings: RunSettings, state: RunState, writer: RecordWriter, client_settings: ClientSettings, pool: CasePool | None
) -> None:
    gpus = None
    try:
        async with Client(client_settings) as client:
            model = await client.choose_model()
            gpus = await _gpu_sampler(settings, model)
            await _measure_with(settings, state, writer, client, model, gpus, pool)
    finally:
        if gpus is not None:
            await gpus.close()


async def _gpu_sampler(settings: RunSettings, model: str) -> gpu_mod.GpuSampler | None:
    """--gpu-metrics: the sampler, probed, with the idle baseline taken before anything is sent
    (calibration included); GpuError when the GPUs cannot be read at all."""
    if settings.gpu_metrics is None:
        return None
    ceiling = settings.ceiling.resolve(model)
    stated = None if settings.ceiling.bandwidth_gbs else settings.ceiling.hardware
    peak = (ceiling.bandwidth_gbs, ceiling.bandwidth_source, stated) if ceiling else (None, None)
    return await gpu_mod.start_sampler(settings.gpu_metrics, peak)


@dataclass(frozen=True)
class Calibrated:
    """What the calibrate phase made: by endpoint, calibrations and text fits; by case index, fitted bodies."""

    calibrations: dict[str, Calibration]
    text_fits: dict[str, tuple[float, float] | None]
    fitted: dict[int, dataset_fit.FittedBodies]
    counter: TokenCounter  # what counted the prompts: with --tokenizer it counts the answers too


async def _measure_with(
    settings: RunSettings,
    state: RunState,
    writer: RecordWriter,
    client: Client,
    model: str,
    gpus: gpu_mod.GpuSampler | None,
    pool: CasePool | None,
) -> None:
    """The phases: connect → server facts, calibrate → calibrations (and the setup), plan → case plans, measure."""
    salt = secrets.token_hex(6)
    settings, facts = await _connect(settings, state, client, model, gpus)
    progress = Progress(len(settings.cases), settings.progress)
    calibrated = await _calibrate(settings, state, client, facts, salt, progress)
    gpu_names = gpus.setup.gpus.values() if gpus is not None else ()  # a --hardware they contradict gives way
    state.setup = replace(
        run_setup(settings, model, version_text(facts.identity), calibrated.calibrations, gpu_names),
        server=facts.identity,
        server_metrics=facts.metrics,
        calibration_failures=client.calibration_failures,
        gpu=gpus.setup if gpus is not None else None,
    )
    if settings.canary:
        state.phase = "sending the canary prompts (before the first case)"
        state.setup = replace(state.setup, canary=await canary.run(client, settings.endpoint))
    state.plans = _plan(settings, facts, calibrated, salt)
    if (data := dataset_setup(state.plans, calibrated.calibrations, settings.nonce)) is not None:
        state.setup = replace(state.setup, dataset=data)  # its sampling drawn here as each case will draw it
    state.planned = [PlannedCase.of(p.case, p.endpoint, p.runs, p.measured or None) for p in state.plans]
    save_manifest(state)  # before the first request of a case: a killed run keeps it
    sink = state.sink = RecordSink(writer, progress, settings.limits)
    try:
        await _measure_cases(settings, state, client, facts, calibrated, salt, pool, gpus, sink)
    finally:
        progress.finish()


async def _connect(
    settings: RunSettings, state: RunState, client: Client, model: str, gpus: gpu_mod.GpuSampler | None
) -> tuple[RunSettings, ServerFacts]:
    """Who the server is, which cases its context holds (--skip-unfit: the settings then hold
    only those), what its /metrics offer; the start banner."""
    identity = await server_mod.identify(client, client.base, model)
    fit = refuse_too_long(settings.cases, identity, settings.skip_unfit, settings.load.requests)
    if len(fit) < len(settings.cases):  # --skip-unfit: the rest of the run sees only these
        unfit = unfit_cases(settings.cases, identity, settings.load.requests)
        state.skipped = [
            results_mod.NotMeasured(label, f"skipped (--skip-unfit): {why}") for label, why in unfit.items()
        ]
        settings = replace(settings, cases=fit)
    scraper, metrics_status = await metrics_scraper(client, model, settings.server_metrics, settings.replicas)
    if settings.announce:
        settings.announce(_banner(identity, settings, metrics_status, gpus))
    return settings, ServerFacts(model, identity, metrics_status, scraper)


async def _calibrate(
    settings: RunSettings, state: RunState, client: Client, facts: ServerFacts, salt: str, progress: Progress
) -> Calibrated:
    """How the server counts tokens, per endpoint the cases use, before anything is measured."""
    endpoints = sorted({c.endpoint or settings.endpoint for c in settings.cases})
    state.phase = "calibrating prompt lengths (before the first case)"
    progress.note(f"calibrating prompt lengths against {facts.model} …")
    counter = await best_counter(client, settings.tokenizer, settings.endpoint)
    lengths = await fit_words(counter)  # which words are one server token
    calibrations = {ep: await calibrate(client, ep, salt, settings.template, lengths) for ep in endpoints}
    for ep, longest in _longest_prompts(settings).items():
        calibrations[ep] = await check_length(client, ep, calibrations[ep], salt, longest, settings.template)
    # --dataset: its lengths are of real text, which a server counts otherwise than the filler
    text_fits = {
        ep: await calibrate_text(client, ep, calibrations[ep], settings.cases, salt, settings.template)
        for ep in endpoints
    }
    # a fitted dataset case's bodies, cut by the same exact source before any case
    fitted = await dataset_fit.prepare(
        settings.cases, calibrations, counter, settings.endpoint, settings.nonce, settings.load.seed
    )
    return Calibrated(calibrations, text_fits, fitted, counter)


def _plan(settings: RunSettings, facts: ServerFacts, calibrated: Calibrated, salt: str) -> list[CasePlan]:
    """Each case's plan, in the order the cases run."""
    return [
        CasePlan(
            case=bind_dataset(
                c,
                facts.identity.context_length,
                calibrated.text_fits[c.endpoint or settings.endpoint],
                calibrated.fitted.get(i),
            ),
            index=i,
            runs=c.runs or settings.runs,
            warmup=settings.warmup,
            endpoint=c.endpoint or settings.endpoint,
            salt=salt,
            template=settings.template,
            stop=settings.stop,
            alone=alone_requests(c, settings.cases),
            **_load_plan(settings.load),
        )
        for i, c in enumerate(settings.cases)
    ]


async def _measure_cases(
    settings: RunSettings,
    state: RunState,
    client: Client,
    facts: ServerFacts,
    calibrated: Calibrated,
    salt: str,
    pool: CasePool | None,
    gpus: gpu_mod.GpuSampler | None,
    sink: RecordSink,
) -> None:
    """Each planned case in turn, its records into the sink, its windows (the server's, the
    GPUs') into the state; after each, off its clock, the server's /tokenize of a few records."""
    writer, progress = sink.writer, sink.progress
    stop = sink.stop  # set once an error limit is passed: the run ends
    server_tokenize = ServerTokenize()  # a witness asked after each case (load/tokenize.py)
    resetting = settings.cache_reset
    for plan in state.plans:
        if stop.is_set():
            break
        if resetting:
            resetting = await _reset_cache(state, settings, client, facts.identity, plan.case.label, progress)
        measured = plan.measured if plan.expected_records is not None else None  # the bar counts these
        progress.start_case(plan.case.label, measured, plan.duration_s)
        sink.open_case(plan.case.label)
        state.started.append(plan.case.label)
        save_manifest(state)
        written = writer.mark()  # the case's records follow: read back for /tokenize after it
        window = server_window.Window(facts.scraper) if facts.scraper else None
        gpu_window = gpus.window() if gpus else None
        try:
            await _run_one_case(
                state, settings, client, plan, calibrated.calibrations, salt, pool, sink, window, gpu_window, progress
            )
        except BaseException:
            if gpu_window is not None:
                gpu_window.abort()
                state.gpu[plan.case.label] = gpu_window.result
            if window is not None:  # a stopped run saves at once: no last scrape
                window.abort()
                state.server[plan.case.label] = server_metrics.NoServerFigures(str(window.result))
            raise
        if gpu_window is not None:  # first: the server's settling wait is not the case's
            await gpu_window.close()
            state.gpu[plan.case.label] = gpu_window.result
        if window is not None:
            await _close_window(state, plan.case.label, window, cut_short=stop.is_set())
        # off the case's clock, from the case's records as written
        await server_tokenize.settle(client.server_token_count, writer.records_since(written), writer.witness)
        if isinstance(calibrated.counter, FileTokenizer):  # the model's own count of each answer's text
            count_answers(calibrated.counter.count_now, writer.records_since(written), writer.witness)
        save_manifest(state)  # the case's windows


def rebuild(directory: Path, report: bool = True) -> results_mod.RunResult:
    """results.json (and the report) of a run folder, made again from its bundle alone (a run
    killed before it saved, or one analysed again); BundleError (one line) without a bundle."""
    return publish(analysis.analyze(analysis.Bundle.read(directory)), directory, report)


async def _reset_cache(
    state: RunState,
    settings: RunSettings,
    client: Client,
    identity: server_mod.ServerIdentity,
    label: str,
    progress: Progress,
) -> bool:
    """--cache-reset before one case; False once the server has shown it has no way to (the
    rest of the run goes on without, as setup.cache_reset says)."""
    outcome = await cache_reset.reset(client, client.base, identity)
    state.cache_resets[label] = outcome
    if state.setup is not None:  # the last reset's outcome (its calls are the case's: its window)
        state.setup = replace(state.setup, cache_reset=replace(outcome, calls=0))
    if not outcome.ok:
        line = f"benchy: --cache-reset: {outcome.message}"
        settings.announce(line) if settings.announce else progress.note(line)
    return outcome.ok


async def _run_one_case(
    state: RunState,
    settings: RunSettings,
    client: Client,
    plan: CasePlan,
    calibrations: dict[str, Calibration],
    salt: str,
    pool: CasePool | None,
    sink: RecordSink,
    window: server_window.Window | None,
    gpu_window: gpu_mod.GpuWindow | None = None,
    progress: Progress | None = None,
) -> None:
    """One case, in this process, in worker processes or on Ray actors; the server's and the
    GPUs' windows open once the warmups are done, so their figures cover the measured requests only."""

    async def start() -> float:
        if window is not None:
            await window.open()
        if gpu_window is not None:
            await gpu_window.open()
        if progress is not None:
            progress.measuring(plan.duration_s, plan.drain_window)
        return time.perf_counter()

    # Workloads run in one process (or actor): a conversation's turns depend on each other,
    # and a trace's or a group's reuse spans all of its requests.
    calibration = calibrations[plan.endpoint]
    await send_alone(client, plan, calibration, settings.nonce, sink, sink.sent)  # before the case, from here
    k = 1 if plan.case.workload or pool is None else pool.workers_for(plan.case, settings.load)
    if pool is not None and (k > 1 or settings.load.ray is not None):  # --ray: always a pool
        with worker_failures():  # `start` is awaited once every worker is done with its warmups
            split = await pool.run_case(
                plan, k, client.settings, calibration, settings.nonce, sink, sink.stop, start, sink.sent
            )
        state.client[plan.case.label] = split
        return
    factory = PromptFactory(calibration, nonce=settings.nonce, salt=f"{salt}c{plan.index}")

    async def frozen_start() -> float:  # the warmups are done: the collector passes over the case's own objects
        heap.enter_context(frozen_heap())
        return await start()

    with contextlib.ExitStack() as heap:
        async with LoopMonitor() as monitor:
            await run_case(client, plan, factory, sink, frozen_start, stop=sink.stop, on_sent=sink.sent)
    mine = sink.tallies.get(plan.case.label)  # its spans and tokens kept as they came
    spans, tokens = (mine.spans(), mine.client_tokens()) if mine is not None else ([], 0)
    state.client[plan.case.label] = client_figures(
        [worker_entry(0, LOCAL_CLOCK, monitor.figures(spans), len(mine) if mine is not None else 0, tokens)]
    )


async def _close_window(state: RunState, label: str, window: server_window.Window, cut_short: bool) -> None:
    """The case's last snapshot, once the server has counted its measured requests; none when
    an error limit cut the case short (requests cancelled in flight blur the server's count)."""
    if cut_short:
        window.abort()
    else:
        seen = state.sink.tallies.get(label) if state.sink is not None else None
        window.expected_requests = seen.served if seen is not None else 0
        window.cut = bool(seen and seen.cut)  # a counter that fell is a restart only where requests were cut
        await window.close()
    result = window.result
    state.server[label] = result if not isinstance(result, str) else server_metrics.NoServerFigures(result)


def _banner(
    identity: server_mod.ServerIdentity,
    settings: RunSettings,
    status: server_metrics.MetricsStatus,
    gpus: gpu_mod.GpuSampler | None = None,
) -> str:
    where = redact_url(settings.client.base_url)
    endpoints = dict.fromkeys(c.endpoint or settings.endpoint for c in settings.cases)
    note = f"endpoint {', '.join(endpoints)} · "  # which API is measured, in the first line (issue 54)
    note += f"server metrics: {status.engine}" if status.available else "no server metrics"
    if gpus is not None:
        idle = gpus.setup.baseline.power_w if gpus.setup.baseline else None
        note += f"; {len(gpus.setup.gpus)} GPU(s) via {gpus.setup.source}" + (f", idle {idle:.0f} W" if idle else "")
    return server_mod.banner(identity, where, str(settings.output_dir) if settings.output_dir else None, note)


def _longest_prompts(settings: RunSettings) -> dict[str, int]:
    """Endpoint → the longest prompt (depth + pp) any case sends there."""
    longest: dict[str, int] = {}
    for case in settings.cases:
        ep = case.endpoint or settings.endpoint
        longest[ep] = max(longest.get(ep, 0), case.depth + case.pp)
    return longest


def _load_plan(load: LoadSettings) -> dict[str, Any]:
    return {
        "requests": load.requests,
        "duration_s": load.duration_s,
        "drain_s": load.drain_s,
        "max_inflight": load.max_inflight,
        "seed": load.seed,
        "batch": load.batch,
        "images": load.images,
    }
