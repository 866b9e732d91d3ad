"""Sends a probe: the calibration, each length's interleaved shared and unique prefixes one at a
time, or the capacity sweep's passes; writes its bundle (bundle.py) as it goes, then analyses it
(analyze.py) as `benchy rebuild` would."""

from __future__ import annotations

import contextlib
import datetime as dt
import platform
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from benchy import __version__
from benchy.client import loop as event_loop
from benchy.client.client import Client
from benchy.client.redact import redact_url
from benchy.client.settings import ClientSettings
from benchy.jsontypes import JsonObject
from benchy.load.calibration import Calibration
from benchy.load.images import ImageSettings, with_images
from benchy.load.lengths import fit_lengths
from benchy.load.plan import PlannedRequest
from benchy.load.progress import Progress
from benchy.load.prompts import Prompt, PromptFactory, calibrate, exact_length_options
from benchy.load.send import Closed, send
from benchy.probe import images
from benchy.probe.analyze import CAPACITY_CASE, LENGTH_CASE, Sweep, analyze, capacity_point
from benchy.probe.bundle import CapacityPlan, ImagePlan, PlannedLength, ProbeManifest, write_manifest
from benchy.probe.verdict import ALPHA, MIN_SPEEDUP
from benchy.records import RecordWriter, RequestRecord
from benchy.records.plan import NO_TAGS, RequestTags, Sent, Tagged
from benchy.results.probe import IMAGE_TEXT_TOKENS, NotProbed, ProbeResult, ProbeSetup, ResetCalls, StatedSize
from benchy.server import cache_reset
from benchy.server import capacity as capacity_mod
from benchy.server import gpu as gpu_mod
from benchy.server import identity as server_mod
from benchy.server.cache_reset import CacheReset
from benchy.server.identity import ServerIdentity

DEFAULT_LENGTHS = (2000, 8000, 27000)
CONTEXT_MARGIN = 0.02  # calibration is within ±1%: keep prompts clear of the context limit
CAPACITY_PRECISION = 0.1  # bisect until the bracket's half-width is this share of its middle
CAPACITY_MAX_PASSES = 14

Reset = Callable[[], Awaitable[None]]


@dataclass
class ProbeSettings:
    client: ClientSettings
    capacity: bool = False  # --capacity: the capacity sweep instead of the per-length probe
    capacity_prefix_tokens: int = 1024
    capacity_max_tokens: int = 262144
    cache_reset: bool = False  # --cache-reset: empty the cache before each length (each capacity pass)
    lengths: list[int] = field(default_factory=lambda: list(DEFAULT_LENGTHS))
    n: int = 5  # requests per side and length
    tg: int = 8  # output tokens: only the first one matters
    endpoint: str = "chat"
    command_line: str = ""
    on_length: Callable[[int | str], None] | None = None  # before each length (each pass), for progress
    progress: bool = False  # each length's (each pass's) requests counted on stderr as they end (load/progress.py)
    gpu_metrics: str | None = None  # --gpu-metrics: the GPUs sampled over each length (server/gpu.py)
    records_path: Path | None = None  # -o: requests.jsonl, each record as it finishes (the manifest beside it)
    images: ImagePlan | None = None  # --images: the image-cache probe instead of the lengths (probe/images.py)


class ProbeTooLong(ValueError):
    """--capacity-prefix-tokens longer than the server's context: a usage error, before sending."""


def capacity_prefix_limit(context: int | None, tg: int) -> int | None:
    """The longest capacity prefix the server's context holds with its output (None: no limit known)."""
    return int(context * (1 - CONTEXT_MARGIN)) - tg if context else None


def capped_lengths(lengths: list[int], context: int | None, tg: int) -> list[tuple[int, int]]:
    """(length to send, length asked) pairs, each length capped to fit the context; no repeats."""
    limit = int(context * (1 - CONTEXT_MARGIN)) - tg if context else None
    out: dict[int, int] = {}
    for asked in lengths:
        out.setdefault(min(asked, limit) if limit else asked, asked)
    return list(out.items())


def run_probe(settings: ProbeSettings) -> ProbeResult:
    """Probes the server; returns probe.json's content. Raises ServerError when the server
    cannot be used at all."""
    return event_loop.run(_probe(settings))


class _Bundle:
    """The probe's manifest and records: written beside each other under -o, kept in memory for
    the analysis either way."""

    def __init__(
        self, manifest: ProbeManifest, writer: RecordWriter, directory: Path | None, progress: Progress
    ) -> None:
        self.manifest, self.writer, self.directory = manifest, writer, directory
        self.progress = progress  # a 27,000-token length takes a minute: its requests are counted as they end
        self.records: list[Tagged] = []
        self._tags: dict[str, RequestTags] = {}  # of the requests in flight, by request id

    def sent(self, request: Sent) -> None:
        """A request as it leaves: its plan line written, its tags kept to join its record."""
        self._tags[request.record.request_id] = request.tags
        self.writer.sent(request.record.request_id, request.tags)

    def record(self, rec: RequestRecord) -> Tagged:
        """The record written, and kept joined with its tags (as the analysis reads it back)."""
        self.records.append(Tagged.joined(rec, self._tags.pop(rec.request_id, NO_TAGS)))
        self.writer.write(rec)
        self.progress.request_done()
        return self.records[-1]

    def save(self) -> None:
        if self.directory is not None:
            write_manifest(self.manifest, self.directory)


async def _probe(settings: ProbeSettings) -> ProbeResult:
    gpus = None
    try:
        async with Client(settings.client) as client:
            model = await client.choose_model()
            if settings.gpu_metrics is not None:
                gpus = await gpu_mod.start_sampler(settings.gpu_metrics)
            with contextlib.closing(RecordWriter(settings.records_path)) as writer:
                return await _probe_with(settings, client, model, gpus, writer)
    finally:
        if gpus is not None:
            await gpus.close()


async def _probe_with(
    settings: ProbeSettings, client: Client, model: str, gpus: gpu_mod.GpuSampler | None, writer: RecordWriter
) -> ProbeResult:
    # The context one request may hold (llama.cpp: per slot, from /props): longer prompts
    # would only come back as HTTP 400s.
    identity = await server_mod.identify(client, client.base, model)
    context = identity.context_length
    limit = capacity_prefix_limit(context, settings.tg)
    if settings.capacity and limit is not None and settings.capacity_prefix_tokens > limit:
        raise ProbeTooLong(
            f"--capacity-prefix-tokens {settings.capacity_prefix_tokens:,} does not fit the server's context of "
            f"{context:,} tokens ({identity.context_source}) with --tg {settings.tg}: every request would be "
            f"refused; pass --capacity-prefix-tokens {limit:,} or less"
        )
    salt = secrets.token_hex(6)
    fit = await fit_lengths(client, None, settings.endpoint)  # the words one server token each
    calibration = await calibrate(client, settings.endpoint, salt, lengths=fit)
    prompts = PromptFactory(calibration, salt=f"{salt}probe")
    by_length = not settings.capacity and settings.images is None
    lengths = capped_lengths(settings.lengths, context, settings.tg) if by_length else []
    kept = {asked for _, asked in lengths}
    not_probed = [  # capped to a length another asked length already probes
        NotProbed(asked, f"capped to the server's context ({context:,} tokens), as a shorter one was")
        for asked in (settings.lengths if by_length else [])
        if asked not in kept
    ]
    version = await client.server_version()
    setup = _setup(settings, model, version, identity, calibration.saved(), gpus, not_probed)
    manifest = ProbeManifest(setup, lengths=[PlannedLength(length, asked) for length, asked in lengths])
    if settings.capacity:
        manifest.capacity = CapacityPlan(settings.capacity_prefix_tokens, settings.capacity_max_tokens)
    manifest.images = settings.images
    progress = Progress(len(lengths), enabled=settings.progress)
    bundle = _Bundle(manifest, writer, settings.records_path.parent if settings.records_path else None, progress)
    bundle.save()
    reset, resets = _resetter(client, identity, settings.cache_reset)
    for length, _ in lengths:
        if reset is not None:
            await reset()
        if settings.on_length is not None:
            settings.on_length(length)
        progress.start_case(f"{length:,}-token prompts", 2 * settings.n)
        window = gpus.window() if gpus is not None else None
        if window is not None:
            await window.open()
        await _one_at_a_time(client, _plan(settings, length, prompts, salt), bundle)
        if window is not None:
            await window.close()
            manifest.gpu[str(length)] = window.result
    if settings.images is not None:
        if reset is not None:
            await reset()
        label = f"the image cache ({settings.images.width}x{settings.images.height})"
        if settings.on_length is not None:
            settings.on_length(label)
        image_plan = _image_plan(settings, settings.images, prompts, salt)
        bundle.progress.start_case(label, len(image_plan))
        await _one_at_a_time(client, image_plan, bundle)
    if settings.capacity:
        bundle.progress = Progress(0, enabled=settings.progress)  # passes: as many as the search takes
        await _capacity(client, settings, prompts, salt, reset, bundle)
        stated = await capacity_mod.stated_capacity(client, client.base, identity)
        manifest.stated = StatedSize(stated.tokens, stated.source, stated.reason)
    if settings.cache_reset:  # the setup as saved before the first request, with the resets made since
        manifest.setup = replace(setup, cache_reset=ResetCalls(len(resets), resets[-1] if resets else None))
    bundle.progress.finish()
    manifest.finished = True
    bundle.save()
    return analyze(manifest, bundle.records)


def _resetter(client: Client, identity: ServerIdentity, wanted: bool) -> tuple[Reset | None, list[CacheReset]]:
    """(an async reset, the list its outcomes go to), or (None, []) without --cache-reset. A
    server that has no reset is asked once: its answer is kept, and no more calls are made."""
    outcomes: list[CacheReset] = []
    if not wanted:
        return None, outcomes

    async def reset() -> None:
        if outcomes and not outcomes[-1].ok:
            return
        outcomes.append(await cache_reset.reset(client, client.base, identity))

    return reset, outcomes


def _setup(
    settings: ProbeSettings,
    model: str,
    version: str | None,
    identity: ServerIdentity,
    calibration: Calibration,
    gpus: gpu_mod.GpuSampler | None,
    not_probed: list[NotProbed],
) -> ProbeSetup:
    """The probe's setup, made once before the first request (the resets are added at the end)."""
    return ProbeSetup(
        base_url=redact_url(settings.client.base_url),
        model=model,
        server_version=version,
        endpoint=settings.endpoint,
        context_length=identity.context_length,
        n=settings.n,
        output_tokens=settings.tg,
        alpha=ALPHA,
        min_speedup=MIN_SPEEDUP,
        calibration=calibration,
        command_line=settings.command_line,
        started_utc=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        host=platform.node(),
        benchy_version=__version__,
        context_source=identity.context_source,
        gpu=gpus.setup if gpus is not None else None,
        lengths_not_probed=not_probed,
    )


# ---- sending ------------------------------------------------------------------------------


def _request(settings: ProbeSettings, record: RequestRecord, prompt: Prompt, body: JsonObject) -> PlannedRequest:
    """One probe request: the prompt as it is (no template), a few exact output tokens."""
    return PlannedRequest(record, prompt.text, settings.tg, settings.endpoint, body)


def _record(case: str, i: int, request_id: str, prompt: Prompt, length: int, tg: int) -> RequestRecord:
    return RequestRecord(
        case=case,
        run=i,
        index=i,
        warmup=False,
        request_id=request_id,
        nonce=prompt.nonce,
        target_prompt_tokens=length,
        target_output_tokens=tg,
    )


def _plan(settings: ProbeSettings, length: int, prompts: PromptFactory, salt: str) -> list[PlannedRequest]:
    """shared 1, unique 1, shared 2, unique 2, …: one shared prompt text, N unique ones."""
    shared = prompts.build(length)
    body = exact_length_options(settings.tg)
    requests = []
    for i in range(settings.n):
        for side, prompt in (("shared", shared), ("unique", prompts.build(length))):
            rid = f"benchy-probe-{salt}-{length}-{side[0]}{i}"
            rec = _record(f"{LENGTH_CASE} {length} {side}", i, rid, prompt, length, settings.tg)
            requests.append(_request(settings, rec, prompt, body))
    return requests


def _image_plan(settings: ProbeSettings, size: ImagePlan, prompts: PromptFactory, salt: str) -> list[PlannedRequest]:
    """shared 1, unique 1, shared 2, …: every text its own and exact, one image each: the same
    one on the shared side, a new one of the same size on the unique side (probe/images.py)."""
    body = exact_length_options(settings.tg)
    drawn = {
        "shared": ImageSettings(1, size.width, size.height, shared=True),
        "unique": ImageSettings(1, size.width, size.height),
    }
    requests = []
    for i in range(settings.n):
        for side, shown in drawn.items():
            prompt = prompts.build(IMAGE_TEXT_TOKENS)
            rid = f"benchy-probe-{salt}-image-{side[0]}{i}"
            case = f"{images.IMAGE_CASE} {size.width}x{size.height} {side}"
            tags, own = with_images(shown, NO_TAGS, body, prompt.nonce or rid, salt)
            rec = _record(case, i, rid, prompt, IMAGE_TEXT_TOKENS, settings.tg)
            requests.append(replace(_request(settings, rec, prompt, own), tags=tags))
    return requests


async def _one_at_a_time(client: Client, requests: list[PlannedRequest], bundle: _Bundle) -> list[Tagged]:
    """The requests in turn (a queue would add its wait to the TTFT); their records with their
    tags (judged once all are in; the bundle writes each as it leaves and as it finishes)."""
    records: list[Tagged] = []

    def keep(rec: RequestRecord) -> None:
        records.append(bundle.record(rec))

    await send(client, requests, keep, Closed(1), on_sent=bundle.sent)
    return records


async def _capacity_pass(
    client: Client, settings: ProbeSettings, prompts: PromptFactory, k: int, salt: str, bundle: _Bundle
) -> list[Tagged]:
    """K distinct prefixes, each sent once, then each again in the same order."""
    length = settings.capacity_prefix_tokens
    sent = [prompts.build(length) for _ in range(k)]
    body = exact_length_options(settings.tg)
    requests = []
    for side in ("first", "reuse"):
        for i, prompt in enumerate(sent):
            rid = f"benchy-capacity-{salt}-{k}-{side[0]}{i}"
            rec = replace(_record(f"{CAPACITY_CASE} {k} {side}", 0, rid, prompt, length, settings.tg), index=i)
            requests.append(_request(settings, rec, prompt, body))
    return await _one_at_a_time(client, requests, bundle)


async def _capacity(
    client: Client, settings: ProbeSettings, prompts: PromptFactory, salt: str, reset: Reset | None, bundle: _Bundle
) -> None:
    """The capacity sweep (see the package docstring): its records go to the bundle; the
    analysis judges them again, through the same Sweep."""
    sweep = Sweep()

    async def measure(k: int) -> bool:
        if reset is not None:
            await reset()
        if settings.on_length is not None:
            settings.on_length(f"capacity: {k} prefix(es)")
        bundle.progress.start_case(f"capacity: {k} prefix(es)", 2 * k)
        records = await _capacity_pass(client, settings, prompts, k, salt, bundle)
        return sweep.add(capacity_point(k, records[:k], records[k:]))

    k = 1
    while k * settings.capacity_prefix_tokens <= settings.capacity_max_tokens and sweep.falls is None:
        if not await measure(k):
            break
        k *= 2
    while sweep.fits and sweep.falls and sweep.falls - sweep.fits > 1 and len(sweep.points) < CAPACITY_MAX_PASSES:
        if (sweep.falls - sweep.fits) / (sweep.falls + sweep.fits) <= CAPACITY_PRECISION:
            break
        if not await measure((sweep.fits + sweep.falls) // 2):
            break
