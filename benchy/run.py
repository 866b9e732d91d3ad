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
import datetime as dt
import platform
import secrets
import signal
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol

from benchy import __version__
from benchy.analysis import analyze as analysis
from benchy.analysis.analyze import REQUESTS
from benchy.analysis.bundle import CaseWindows, Manifest, PlannedCase, write_manifest
from benchy.client import kernel_stamps
from benchy.client import loop as event_loop
from benchy.client.client import Client
from benchy.client.errors import ServerError
from benchy.client.extra_body import redacted_body as redacted_extra_body
from benchy.client.redact import redact_url, scrub
from benchy.client.settings import ClientSettings, secrets_of
from benchy.load import dataset_fit
from benchy.load.alone import alone_requests, send_alone
from benchy.load.dataset_load import bind as bind_dataset
from benchy.load.dataset_load import calibrate_text
from benchy.load.dataset_load import setup as dataset_setup
from benchy.load.generator import run_case
from benchy.load.handoff import frozen_heap
from benchy.load.lengths import best_counter, fit_words
from benchy.load.monitor import LoopMonitor
from benchy.load.plan import CasePlan, LoadSettings
from benchy.load.progress import Progress
from benchy.load.prompts import Calibration, PromptError, PromptFactory, Template, calibrate, check_length
from benchy.load.tally import CaseTally
from benchy.load.tokenize import ServerTokenize
from benchy.load.workers import LOCAL_CLOCK, ProcessPool, WorkerError, case_workers, client_figures, worker_entry
from benchy.measure import classify
from benchy.measure.ceiling import CeilingInputs
from benchy.measure.records import RecordWriter, RequestRecord
from benchy.results import types as results_mod
from benchy.server import cache_reset, router
from benchy.server import gpu as gpu_mod
from benchy.server import identity as server_mod
from benchy.server import metrics as server_metrics
from benchy.workloads import trace as trace_mod
from benchy.workloads.case import Case
from benchy.workloads.spec import TraceReplay


class CasePool(Protocol):
    """Where a case's shares run besides this process: worker processes (load/workers.py's
    ProcessPool) or Ray actors (load/cluster.py's RayPool); each returns the case's client figures."""

    def workers_for(self, case: Case, load: LoadSettings) -> int: ...

    async def run_case(
        self,
        plan: CasePlan,
        k: int,
        client_settings: ClientSettings,
        calibration: Calibration,
        nonce: bool,
        on_record: Callable[[RequestRecord], None],
        stop: asyncio.Event,
        on_start: Callable[[], Awaitable[float]] | None = None,
    ) -> dict: ...

    def close(self) -> None: ...


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


@dataclass
class RunState:
    """What a run has gathered so far; survives an interruption."""

    setup: dict = field(default_factory=dict)
    # case label → what the live run counts of its finished requests (load/tally.py): the
    # records are written to the bundle and let go; the results are made from the bundle
    seen: dict[str, CaseTally] = field(default_factory=dict)
    bundle_dir: Path | None = None  # where manifest.json and requests.jsonl are written
    n_done: int = 0  # requests finished, every case
    plans: list[CasePlan] = field(default_factory=list)
    interrupted: bool = False
    stopped: dict | None = None  # {"by": "SIGINT" | "SIGTERM" | "max-errors" | "max-error-rate", "reason"}
    n_failed: int = 0
    connect_failures_in_a_row: int = 0
    skipped: list[results_mod.NotMeasured] = field(default_factory=list)  # --skip-unfit's cases
    last_connect_error: str | None = None
    client: dict = field(default_factory=dict)  # case label → LoopMonitor figures
    server: dict[str, server_metrics.ServerCaseMetrics | server_metrics.NoServerFigures] = field(
        default_factory=dict
    )  # case label → the server's figures, or why there are none
    gpu: dict = field(default_factory=dict)  # case label → GpuCase (--gpu-metrics)
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
            state.stopped = {"by": "SIGINT", "reason": "interrupted (Ctrl-C)"}
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
            if state.setup:  # results will be saved: their log beside them, even with no record in it
                writer.start()
            writer.close()
        if not state.setup:  # stopped before the first case: nothing measured, nothing to save
            how = (state.stopped or {}).get("reason", "interrupted")
            raise NothingMeasured(f"{how} while {state.phase}: nothing was measured or saved")
        return finish(state, settings)


def _ended_by_error(state: RunState, message: str) -> None:
    """A run that ends by an error saves no results; its bundle says why it ended (a rebuild
    names it), not that it was killed."""
    state.stopped = {"by": "error", "reason": message}
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
    """What the run has gathered besides its records, typed (analysis/bundle.py)."""
    labels = dict.fromkeys([*state.started, *state.cache_resets, *state.client, *state.server, *state.gpu])
    windows = {}
    for label in labels:
        client = state.client.get(label)
        windows[label] = CaseWindows(
            client=results_mod.ClientHealth.from_dict(client, strict=True) if client else None,
            server=state.server.get(label),
            gpu=state.gpu.get(label),
            cache_reset=state.cache_resets.get(label),
        )
    return Manifest(
        setup=results_mod.Setup.from_dict(state.setup, strict=True),  # an unknown key: a field someone forgot
        cases=state.planned,
        started=list(state.started),
        skipped=list(state.skipped),
        windows={label: w for label, w in windows.items() if w != CaseWindows()},
        interrupted=state.interrupted,
        stopped=results_mod.Stopped(**state.stopped) if state.stopped else None,
        finished=finished,
    )


def save_manifest(state: RunState, finished: bool = False) -> None:
    """Rewrites the bundle's manifest.json."""
    if state.bundle_dir is not None and state.setup:
        write_manifest(manifest_of(state, finished), state.bundle_dir)


class PromptTooLong(Exception):
    """A case asks for a prompt the server's context cannot hold: a usage error, raised before
    anything is sent (the server would answer each request with an HTTP 400)."""


def unfit_cases(cases: list[Case], identity: server_mod.ServerIdentity, requests: int | None = None) -> dict[str, str]:
    """Cases with a prompt that fills the context the server reported: label → why. A sweep
    case's prompt is depth + pp; a trace replay's are its requests' own (its first `requests`
    where --requests limits it)."""
    context = identity.context_length
    if not context:
        return {}
    unfit = {}
    for case in cases:
        prompt = case.depth + case.pp
        if case.kind == "sweep" and prompt >= context:
            depth = f" (--depth {case.depth} + --pp {case.pp})" if case.depth else ""
            unfit[case.label] = (
                f"{case.label} asks for a {prompt:,}-token prompt{depth}, but the server's context is "
                f"{context:,} tokens ({identity.context_source})"
            )
        elif isinstance(case.workload, TraceReplay):
            replayed = trace_mod.load(case.workload.path, case.workload.limit or requests)
            over = [r.input_tokens for r in replayed if r.input_tokens >= context]
            if over:
                unfit[case.label] = (
                    f"{case.label}: {len(over)} of its {len(replayed)} requests ask for prompts of up to "
                    f"{max(over):,} tokens, but the server's context is {context:,} tokens ({identity.context_source})"
                )
    return unfit


def refuse_too_long(
    cases: list[Case], identity: server_mod.ServerIdentity, skip_unfit: bool = False, requests: int | None = None
) -> list[Case]:
    """The cases to run: all of them, or (--skip-unfit) those whose prompt fits the server's
    context. PromptTooLong for a case that does not fit, unless skipped; always when none fits."""
    unfit = unfit_cases(cases, identity, requests)
    fit = [c for c in cases if c.label not in unfit]
    if unfit and not (skip_unfit and fit):
        label, why = next(iter(unfit.items()))
        case = next(c for c in cases if c.label == label)
        others = " or pass --skip-unfit to run only the cases that fit" if fit else ""
        if case.kind == "trace":  # its lengths are the trace's: no flag shortens them
            raise PromptTooLong(
                f"{why}: the server would refuse each with an HTTP 400; replay the trace against a server "
                f"whose context holds its prompts{others}"
            )
        raise PromptTooLong(
            f"{why}: lower --pp/--depth so that prompt and output (--tg {case.tg}) fit in "
            f"{identity.context_length:,}{others}"
        )
    return fit


class NothingMeasured(Exception):
    """The run was stopped before its first case began (while connecting or calibrating)."""


MIN_REQUESTS_FOR_RATE = 10  # --max-error-rate is judged from this many finished requests on


def count_failure(state: RunState, rec: RequestRecord) -> None:
    """Counts a finished record as results.json will, and the connection failures in a row."""
    state.n_done += 1
    state.n_failed += not classify.classify(rec).ok
    gone = rec.status == "error" and rec.error_kind == "connect"
    state.connect_failures_in_a_row = state.connect_failures_in_a_row + 1 if gone else 0
    if gone:
        state.last_connect_error = rec.error


def error_limit_passed(state: RunState, settings: RunSettings) -> dict | None:
    """{by, reason} once --max-errors or --max-error-rate is passed (more errors than allowed,
    not as many), or once the server is gone: requests in a row that found nothing listening
    (or no route) mean every later one would fail alike, so sending them only lengthens a dead
    run (--max-connect-failures). None while the run may go on."""
    failed, done = state.n_failed, state.n_done
    limit = settings.max_connect_failures
    if limit and state.connect_failures_in_a_row >= limit:
        last = state.last_connect_error
        in_a_row = state.connect_failures_in_a_row
        return {
            "by": "server-gone",
            "reason": f"the server is gone: {in_a_row} requests in a row could not connect ({last})",
        }
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


def finish(state: RunState, settings: RunSettings) -> results_mod.RunResult:
    """Completes the manifest, then analyses the bundle on disk as `benchy rebuild` does (one
    path), saves and reports the results."""
    assert state.bundle_dir is not None  # execute sets it first
    save_manifest(state, finished=True)
    built = analysis.analyze(analysis.Bundle.read(state.bundle_dir))
    return publish(built, settings.output_dir, settings.report)


def publish(built: results_mod.RunResult, output_dir: Path | None, report: bool = True) -> results_mod.RunResult:
    """Saves results.json (and the report) of an analysed run; returns it frozen. The analysis
    builds what results.json reads back (analysis.saved_form), so a report made now and
    `benchy report` later are the same; the requests are written a row at a time, so memory
    stays flat in the run's length."""
    results = analysis.saved_form(built)
    if output_dir is not None:
        from benchy.report import exporters  # matplotlib is imported only when a figure is drawn

        exporters.RESULTS_JSON.export(built, output_dir)  # a request at a time
        if report:
            exporters.export(results, output_dir, exporters.REPORT_EXPORTERS)
    return results


def release_streams(rec: RequestRecord) -> None:
    """Empties a finished record's per-event arrays (requests.jsonl has them, its row the
    figures made of them): whoever still holds the record (a sender's plan, a worker's pipe)
    then holds a few numbers, not its stream, which was most of a long run's memory."""
    for name in results_mod.RequestResult._NOT_SAVED:
        setattr(rec, name, type(getattr(rec, name))())  # an empty list or str


async def _execute(settings: RunSettings, state: RunState, writer: RecordWriter) -> None:
    max_concurrency = max(settings.load.streams(c) for c in settings.cases)
    client_settings = replace(settings.client, connections=max_concurrency)
    _stop_on_sigterm(state)
    pool = _start_pool(settings)  # its workers start up while this process calibrates
    try:
        await _measure(settings, state, writer, client_settings, pool)
    finally:
        if pool is not None:
            pool.close()


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
    peak = (ceiling.bandwidth_gbs, ceiling.bandwidth_source) if ceiling else (None, None)
    return await gpu_mod.start_sampler(settings.gpu_metrics, peak)


async def _measure_with(
    settings: RunSettings,
    state: RunState,
    writer: RecordWriter,
    client: Client,
    model: str,
    gpus: gpu_mod.GpuSampler | None,
    pool: CasePool | None,
) -> None:
    salt = secrets.token_hex(6)
    identity = await server_mod.identify(client, client.base, model)
    fit = refuse_too_long(settings.cases, identity, settings.skip_unfit, settings.load.requests)
    if len(fit) < len(settings.cases):  # --skip-unfit: the rest of the run sees only these
        unfit = unfit_cases(settings.cases, identity, settings.load.requests)
        state.skipped = [
            results_mod.NotMeasured(label, f"skipped (--skip-unfit): {why}") for label, why in unfit.items()
        ]
        settings = replace(settings, cases=fit)
    progress = Progress(len(settings.cases), settings.progress)
    endpoints = sorted({c.endpoint or settings.endpoint for c in settings.cases})
    scraper, metrics_status = await _metrics_scraper(client, model, settings.server_metrics, settings.replicas)
    if settings.announce:
        settings.announce(_banner(identity, settings, metrics_status, gpus))
    state.phase = "calibrating prompt lengths (before the first case)"
    progress.note(f"calibrating prompt lengths against {model} …")
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
    state.setup = _setup(settings, model, _version_text(identity), calibrations)
    state.setup["server"] = identity.to_dict()  # typed again by the builder (results/build.run_result)
    state.setup["server_metrics"] = metrics_status.to_dict()
    state.setup["calibration_failures"] = client.calibration_failures
    if gpus is not None:
        state.setup["gpu"] = gpus.setup.to_dict()
    state.plans = [
        CasePlan(
            case=bind_dataset(c, identity.context_length, text_fits[c.endpoint or settings.endpoint], fitted.get(i)),
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
    if (data := dataset_setup(state.plans, calibrations, settings.nonce)) is not None:
        state.setup["dataset"] = data.to_dict()  # its sampling drawn here as each case will draw it
    state.planned = [PlannedCase.of(p.case, p.endpoint, p.runs, p.measured or None) for p in state.plans]
    workloads = {p.case.label for p in state.plans if p.case.workload is not None}
    save_manifest(state)  # before the first request of a case: a killed run keeps it
    stop = asyncio.Event()  # set once an error limit is passed: the run ends
    server_tokenize = ServerTokenize()  # a witness asked after each case (load/tokenize.py)

    def on_record(rec: RequestRecord) -> None:
        seen = state.seen.get(rec.case)
        if seen is None:  # each plan's tally is made when its case starts
            seen = state.seen[rec.case] = CaseTally()
        seen.add(rec)
        writer.write(rec)
        if rec.case not in workloads:  # written and counted: its streams are let go
            release_streams(rec)  # (the sender may hold it; a workload's sender reads them: its history)
        progress.request_done()
        count_failure(state, rec)  # counted as results.json counts it
        passed = None if stop.is_set() else error_limit_passed(state, settings)
        if passed:
            state.stopped = passed
            stop.set()

    resetting = settings.cache_reset
    try:
        for plan in state.plans:
            if stop.is_set():
                break
            if resetting:
                resetting = await _reset_cache(state, settings, client, identity, plan.case.label, progress)
            progress.start_case(plan.case.label, plan.expected_records, plan.duration_s)
            state.seen[plan.case.label] = CaseTally()
            state.started.append(plan.case.label)
            save_manifest(state)
            written = writer.mark()  # the case's records follow: read back for /tokenize after it
            window = scraper.window() if scraper else None
            gpu_window = gpus.window() if gpus else None
            try:
                await _run_one_case(
                    state, settings, client, plan, calibrations, salt, pool, on_record, stop, window, gpu_window
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
            save_manifest(state)  # the case's windows
    finally:
        progress.finish()


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
    state.setup["cache_reset"] = {"endpoint": outcome.endpoint, "ok": outcome.ok, "message": outcome.message}
    if not outcome.ok:
        line = f"benchy: --cache-reset: {outcome.message}"
        settings.announce(line) if settings.announce else progress.note(line)
    return outcome.ok


def _start_pool(settings: RunSettings) -> CasePool | None:
    """Ray actors (--ray), or the local processes the busiest case needs; None when every case
    runs in this process."""
    load = settings.load
    if load.ray is not None:
        from benchy.load import cluster

        return cluster.RayPool.connect(load.ray, load.ray_workers_per_node)
    n = max((case_workers(c, load.workers, load.max_inflight) for c in settings.cases if not c.workload), default=1)
    return ProcessPool(n).start() if n > 1 else None


async def _run_one_case(
    state: RunState,
    settings: RunSettings,
    client: Client,
    plan: CasePlan,
    calibrations: dict[str, Calibration],
    salt: str,
    pool: CasePool | None,
    on_record: Callable[[RequestRecord], None],
    stop: asyncio.Event,
    window: server_metrics.Window | None,
    gpu_window: gpu_mod.GpuWindow | None = None,
) -> None:
    """One case, in this process, in worker processes or on Ray actors; the server's and the
    GPUs' windows open once the warmups are done, so their figures cover the measured requests only."""

    async def start() -> float:
        if window is not None:
            await window.open()
        if gpu_window is not None:
            await gpu_window.open()
        return time.perf_counter()

    # Workloads run in one process (or actor): a conversation's turns depend on each other,
    # and a trace's or a group's reuse spans all of its requests.
    calibration = calibrations[plan.endpoint]
    await send_alone(client, plan, calibration, settings.nonce, on_record)  # before the case, from here
    k = 1 if plan.case.workload or pool is None else pool.workers_for(plan.case, settings.load)
    if pool is not None and (k > 1 or settings.load.ray is not None):  # --ray: always a pool
        state.client[plan.case.label] = await _run_in_workers(
            pool, plan, k, client.settings, calibration, settings.nonce, on_record, stop, start
        )
        return
    factory = PromptFactory(calibration, nonce=settings.nonce, salt=f"{salt}c{plan.index}")

    async def frozen_start() -> float:  # the warmups are done: the collector passes over the case's own objects
        heap.enter_context(frozen_heap())
        return await start()

    with contextlib.ExitStack() as heap:
        async with LoopMonitor() as monitor:
            await run_case(client, plan, factory, on_record, frozen_start, stop=stop)
    mine = state.seen.get(plan.case.label)  # its spans and tokens kept as they came
    spans, tokens = (mine.spans(), mine.client_tokens()) if mine is not None else ([], 0)
    state.client[plan.case.label] = client_figures(
        [worker_entry(0, LOCAL_CLOCK, monitor.figures(spans), len(mine) if mine is not None else 0, tokens)]
    )


async def _metrics_scraper(
    client: Client, model: str, wanted: bool, named: tuple[str, ...] = ()
) -> tuple[server_metrics.MetricsScraper | None, server_metrics.MetricsStatus]:
    """/metrics of the server, or behind a router of every replica (those the user named with
    --replica, else those the router's own page names: server/router.py)."""
    url = f"{server_mod.root_url(client.base)}/metrics"
    if not wanted:
        return None, server_metrics.MetricsStatus(url, False, reason="turned off with --no-server-metrics")
    named_by, replicas = ("--replica", [r.rstrip("/") for r in named]) if named else (None, [])
    if not named:
        named_by, replicas = await router.replicas_named(client, server_mod.root_url(client.base))
    scraper = server_metrics.MetricsScraper(client, url, model, [f"{r}/metrics" for r in replicas])
    status = await scraper.probe()
    status.router, status.replicas = named_by, [redact_url(r) for r in status.replicas]
    return (scraper if status.available else None), status


async def _close_window(state: RunState, label: str, window: server_metrics.Window, cut_short: bool) -> None:
    """The case's last snapshot, once the server has counted its measured requests; none when
    an error limit cut the case short (requests cancelled in flight blur the server's count)."""
    if cut_short:
        window.abort()
    else:
        seen = state.seen.get(label)
        window.expected_requests = seen.served if seen is not None else 0
        await window.close()
    result = window.result
    state.server[label] = result if not isinstance(result, str) else server_metrics.NoServerFigures(result)


def _version_text(identity: server_mod.ServerIdentity) -> str | None:
    """setup.server_version as before issue 17: one line, e.g. 'vLLM 0.11.0'."""
    known = identity.engine or identity.version or identity.build or identity.server_header
    return identity.engine_version if known else None


def _banner(
    identity: server_mod.ServerIdentity,
    settings: RunSettings,
    status: server_metrics.MetricsStatus,
    gpus: gpu_mod.GpuSampler | None = None,
) -> str:
    where = redact_url(settings.client.base_url)
    note = f"server metrics: {status.engine}" if status.available else "no server metrics"
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


def _load_plan(load: LoadSettings) -> dict:
    return {
        "requests": load.requests,
        "duration_s": load.duration_s,
        "max_inflight": load.max_inflight,
        "seed": load.seed,
        "batch": load.batch,
    }


async def _run_in_workers(
    pool: CasePool,
    plan: CasePlan,
    k: int,
    client_settings: ClientSettings,
    calibration: Calibration,
    nonce: bool,
    on_record: Callable[[RequestRecord], None],
    stop: asyncio.Event,
    on_start: Callable[[], Awaitable[float]] | None = None,
) -> dict:
    """The case split over k worker processes (workers.py) or Ray actors (cluster.py); returns
    the case's client figures. `on_start` is awaited once every worker is done with its warmups."""
    try:
        return await pool.run_case(plan, k, client_settings, calibration, nonce, on_record, stop, on_start)
    except WorkerError as exc:
        if exc.kind == "PromptError":
            raise PromptError(str(exc)) from None
        raise ServerError(f"a worker failed: {exc.kind}: {exc}") from None


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
        "event_loop": event_loop.name(),
        "receive_stamps": kernel_stamps.described(settings.client.transport, settings.client.stream),
        "command_line": settings.command_line,
        "extra_body": redacted_extra_body(settings.client.extra_body),
        "started_utc": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "prompt_nonce": settings.nonce,
        "runs": settings.runs,
        "warmup": settings.warmup,
        "calibration": main_cal.to_dict(),
        "calibrations": {ep: c.to_dict() for ep, c in calibrations.items()},
        "tokenizer": _tokenizer_text(main_cal),
        "load": settings.load.to_dict(),
        **_ceiling_setup(settings.ceiling, model),
        **_template_setup(settings),
        **_client_ceiling_setup(),
    }


def _tokenizer_text(cal: Calibration) -> str:
    """setup.tokenizer: what counted the prompts (load/lengths.py)."""
    if cal.lengths.words is None:
        return "o200k_base (offline), calibrated to the server's usage counts"
    return f"o200k_base (offline), on words one token each by {cal.lengths.method}"


def _client_ceiling_setup() -> dict:
    """This host's cached `benchy selftest`, when it was measured."""
    from benchy.measure import selftest

    found = selftest.cached()
    return {"client_ceiling": found.to_dict()} if found else {}


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
