"""A whole benchmark run: connect, calibrate, send every case, save results as they come.

Flow: cases → CasePlan (loadgen) → records (appended to requests.jsonl as each finishes) →
results (metrics + stats) → checks → results.json. Interrupted runs keep what they measured.
"""
from __future__ import annotations

import asyncio
import datetime as dt
import platform
import secrets
from dataclasses import dataclass, field, replace
from pathlib import Path

from benchy import __version__, checks, results as results_mod
from benchy.client import Client, ClientSettings, ServerError, redact_url
from benchy.loadgen import CasePlan, run_case
from benchy.progress import Progress
from benchy.prompts import Calibration, PromptFactory
from benchy.records import RecordWriter, RequestRecord
from benchy.scenario import Case


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


@dataclass
class RunState:
    """What a run has gathered so far; survives an interruption."""
    setup: dict = field(default_factory=dict)
    records: list[RequestRecord] = field(default_factory=list)
    plans: list[CasePlan] = field(default_factory=list)
    interrupted: bool = False


def execute(settings: RunSettings) -> dict:
    """Runs the benchmark; returns the results (also saved under output_dir). Raises
    ServerError when the server cannot be used at all."""
    state = RunState()
    writer = RecordWriter(settings.output_dir / "requests.jsonl" if settings.output_dir else None)
    try:
        asyncio.run(_execute(settings, state, writer))
    except KeyboardInterrupt:
        state.interrupted = True
    finally:
        writer.close()
    if not state.setup:
        raise ServerError("interrupted before the first request")
    return finish(state, settings)


def finish(state: RunState, settings: RunSettings) -> dict:
    results = build_results(state)
    if settings.output_dir is not None:
        results_mod.save(results, settings.output_dir)
    return results


def build_results(state: RunState) -> dict:
    by_case: dict[str, list[RequestRecord]] = {}
    for rec in state.records:
        by_case.setdefault(rec.case, []).append(rec)
    cases = [results_mod.case_entry(p.case, p.endpoint, p.runs, by_case.get(p.case.label, []))
             for p in state.plans if p.case.label in by_case]
    results = {
        "schema": results_mod.SCHEMA,
        "benchy_version": __version__,
        "prompt_nonce": state.setup.get("prompt_nonce"),
        "partial": state.interrupted or len(cases) < len(state.plans),
        "setup": state.setup,
        "cases": cases,
    }
    results["warnings"] = checks.run_checks(results)
    return results


async def _execute(settings: RunSettings, state: RunState, writer: RecordWriter) -> None:
    max_concurrency = max(c.concurrency for c in settings.cases)
    client_settings = replace(settings.client, connections=max_concurrency)
    async with Client(client_settings) as client:
        model = await _resolve_model(client)
        client.settings = replace(client.settings, model=model)
        salt = secrets.token_hex(6)
        endpoints = sorted({c.endpoint or settings.endpoint for c in settings.cases})
        calibrations = {ep: await _calibrate(client, ep, salt) for ep in endpoints}
        state.setup = _setup(settings, model, await client.server_version(), calibrations)
        state.plans = [CasePlan(case=c, index=i, runs=c.runs or settings.runs, warmup=settings.warmup,
                                endpoint=c.endpoint or settings.endpoint, salt=salt)
                       for i, c in enumerate(settings.cases)]
        progress = Progress(sum(p.measured + p.warmup for p in state.plans), settings.progress)

        def on_record(rec: RequestRecord) -> None:
            state.records.append(rec)
            writer.write(rec)
            progress.request_done()

        try:
            for plan in state.plans:
                progress.start_case(plan.case.label)
                factory = PromptFactory(calibrations[plan.endpoint], nonce=settings.nonce,
                                        salt=f"{salt}c{plan.index}")
                await run_case(client, plan, factory, on_record)
        finally:
            progress.finish()


async def _resolve_model(client: Client) -> str:
    models = await client.list_models()
    ids = [str(m.get("id")) for m in models if isinstance(m, dict) and m.get("id")]
    wanted = client.settings.model
    if wanted is None:
        if not ids:
            raise ServerError("the server lists no models; pass --model")
        return ids[0]
    if ids and wanted not in ids:
        raise ServerError(f"model {wanted!r} is not served; the server offers: {', '.join(ids)}")
    return wanted


async def _calibrate(client: Client, endpoint: str, salt: str) -> Calibration:
    """Fits the server's token count of our prompts (chat template and tokenizer included)."""
    prompts = PromptFactory(salt=f"{salt}cal{endpoint}").calibration_prompts()
    usages = [await client.usage_of(p.text, endpoint) for p in prompts]
    return Calibration.fit((prompts[0].local_tokens, prompts[1].local_tokens),
                           (usages[0]["prompt_tokens"], usages[1]["prompt_tokens"]))


def _setup(settings: RunSettings, model: str, version: str | None,
           calibrations: dict[str, Calibration]) -> dict:
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
    }
