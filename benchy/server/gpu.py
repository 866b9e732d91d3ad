"""Sampling the GPUs beside each case: a dcgm-exporter endpoint, or NVML on this host.

Why: energy per token and measured memory-bandwidth use come from the GPUs, not the server's
API. In most GPU clusters NVIDIA's dcgm-exporter publishes them as Prometheus text (parsed
here by prometheus-client's own parser, as /metrics is); on a single box NVML reads them
directly (`nvidia-ml-py`, the optional extra `benchy[gpu]`, imported only when asked for).
A sample is taken before each case's measured requests, at a steady interval while they run,
and after them; measure/gpu.py turns the samples into the case's figures. An idle baseline is
sampled before the first case. A sample that fails is counted and its reason kept: never a
silent zero. The exporter gets its own HTTP session: the server's API key never goes to it.

`GpuSampler` is reusable by any command: `probe()` once, `sample_baseline()`, then a
`window()` per case (`open()`, `close()`, `result`).
"""

from __future__ import annotations

import asyncio
import importlib
import math
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit, urlunsplit

from prometheus_client.parser import text_string_to_metric_families

from benchy.measure import gpu as figures
from benchy.measure.gpu import GpuBaseline, GpuCase, GpuReading, GpuSample, GpuSetup

if TYPE_CHECKING:
    import aiohttp  # imported by DcgmSource when one is read: a run without --gpu-metrics URL never needs it

INTERVAL_S = 0.5
BASELINE_S = 2.0
SCRAPE_TIMEOUT_S = 5.0
MAX_SAMPLES = 7200  # an hour at two a second: memory stays bounded on long cases
MAX_ERRORS_KEPT = 3

# dcgm-exporter's field names; each is (name, scale to benchy's unit).
DCGM_FIELDS = {
    "power_w": ("DCGM_FI_DEV_POWER_USAGE", 1.0),  # W
    "energy_j": ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", 1e-3),  # mJ since the driver loaded
    "util_pct": ("DCGM_FI_DEV_GPU_UTIL", 1.0),  # %
    "dram_active": ("DCGM_FI_PROF_DRAM_ACTIVE", 1.0),  # ratio of cycles, 0…1
    "fb_used_mib": ("DCGM_FI_DEV_FB_USED", 1.0),  # MiB
}
# Read where the exporter publishes them, never reported missing: what a drift over the run is
# set beside (results/drift.py). CLOCKS_EVENT_REASONS is the newer name of THROTTLE_REASONS.
THERMAL_FIELDS = {
    "DCGM_FI_DEV_SM_CLOCK": "sm_clock_mhz",
    "DCGM_FI_DEV_GPU_TEMP": "temp_c",
    "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS": "throttle_reasons",
    "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": "throttle_reasons",
}
NVML_FIELDS = {
    "power_w": "nvmlDeviceGetPowerUsage",
    "energy_j": "nvmlDeviceGetTotalEnergyConsumption",
    "util_pct": "nvmlDeviceGetUtilizationRates.gpu",
    "dram_active": "nvmlDeviceGetUtilizationRates.memory",
    "fb_used_mib": "nvmlDeviceGetMemoryInfo.used",
}


class GpuError(Exception):
    """The GPUs cannot be sampled; the message is the reason, one line."""


class Source(Protocol):
    kind: str
    where: str | None
    names: dict[str, str]
    bandwidth_basis: str

    async def read(self) -> GpuSample: ...

    async def close(self) -> None: ...


# ------------------------------------------------------------------ dcgm-exporter


def gpu_key(labels: dict[str, str]) -> str:
    """One GPU's id: Hostname/gpu where the exporter names the host, else gpu, else UUID."""
    gpu = labels.get("gpu") or labels.get("UUID") or labels.get("device") or "0"
    host = labels.get("Hostname") or labels.get("hostname")
    return f"{host}/{gpu}" if host else gpu


def parse_dcgm(text: str, t_s: float) -> GpuSample:
    """A sample of dcgm-exporter's text; raises GpuError when it is not Prometheus text."""
    wanted = {name: (field, scale) for field, (name, scale) in DCGM_FIELDS.items()}
    wanted.update({name: (field, 1.0) for name, field in THERMAL_FIELDS.items()})
    sample = GpuSample(t_s)
    try:
        parsed = [s for family in text_string_to_metric_families(text) for s in family.samples]
    except (ValueError, TypeError, IndexError) as exc:
        raise GpuError(f"the GPU endpoint's text is not Prometheus text ({type(exc).__name__})") from None
    for s in parsed:
        name = s.name.removesuffix("_total")
        if name not in wanted or math.isnan(float(s.value)):
            continue
        field, scale = wanted[name]
        reading = sample.gpus.setdefault(gpu_key(s.labels), GpuReading())
        setattr(reading, field, float(s.value) * scale)
        reading.name = reading.name or s.labels.get("modelName")
    return sample


class DcgmSource:
    """dcgm-exporter's endpoint, read through an aiohttp session of its own: no API key, no
    --header of the server, no proxy from the environment (trust_env off). aiohttp is imported
    only here, when a --gpu-metrics URL is read: the exporter is not the server, so the
    client's page source (whose credentials and proxy are the server's) is not for it, and
    benchy.server may not import benchy.client for a second, credential-free one."""

    kind = "dcgm"
    names = {field: name for field, (name, _) in DCGM_FIELDS.items()}
    bandwidth_basis = "DCGM_FI_PROF_DRAM_ACTIVE: the share of cycles the memory interface moved data"

    def __init__(self, url: str) -> None:
        self.url = url
        self.where: str | None = redact(url)
        self._session: aiohttp.ClientSession | None = None

    async def read(self) -> GpuSample:
        import aiohttp

        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=SCRAPE_TIMEOUT_S))
        try:
            async with self._session.get(self.url) as resp:
                if resp.status != 200:
                    raise GpuError(f"GET {self.where} answered HTTP {resp.status}")
                text = await resp.text()
        except asyncio.TimeoutError:
            raise GpuError(f"GET {self.where} gave no answer within {SCRAPE_TIMEOUT_S:g} s") from None
        except aiohttp.ClientError as exc:
            raise GpuError(f"GET {self.where} failed: {type(exc).__name__}") from None
        sample = parse_dcgm(text, time.perf_counter())
        if not sample.gpus:
            raise GpuError(f"{self.where} answered, but holds no DCGM_FI_ field benchy reads (is it dcgm-exporter?)")
        return sample

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()


# ------------------------------------------------------------------ NVML


class NvmlSource:
    """This host's GPUs through NVML (nvidia-ml-py). Its calls block for microseconds to a
    millisecond, so each sample runs in a thread, off the client's event loop."""

    kind = "nvml"
    where: str | None = None
    names = NVML_FIELDS
    bandwidth_basis = (
        "NVML memory utilization: the share of time memory was read or written, not of its bandwidth, "
        "so the GB/s derived from it is a rough indication, neither bound (on an H200 llama-server it read "
        "17-41% of peak where the decode rate implied 68-72%); dcgm-exporter's DRAM_ACTIVE is the closer figure"
    )

    def __init__(self) -> None:
        self.nvml = load_nvml()
        self.handles: list[Any] = []

    def start(self) -> None:
        nvml = self.nvml
        try:
            nvml.nvmlInit()
            count = nvml.nvmlDeviceGetCount()
        except nvml.NVMLError as exc:
            raise GpuError(f"NVML cannot start here ({exc}): no NVIDIA GPU or driver?") from None
        if count == 0:
            raise GpuError("NVML sees no GPU on this host")
        self.handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]

    async def read(self) -> GpuSample:
        if not self.handles:
            await asyncio.to_thread(self.start)
        return await asyncio.to_thread(self.read_now)

    def read_now(self) -> GpuSample:
        return GpuSample(time.perf_counter(), {str(i): self._reading(h) for i, h in enumerate(self.handles)})

    def _reading(self, handle: Any) -> GpuReading:
        nvml = self.nvml
        util = self._call(nvml.nvmlDeviceGetUtilizationRates, handle)
        memory = self._call(nvml.nvmlDeviceGetMemoryInfo, handle)
        power_mw = self._call(nvml.nvmlDeviceGetPowerUsage, handle)
        energy_mj = self._call(nvml.nvmlDeviceGetTotalEnergyConsumption, handle)
        name = self._call(nvml.nvmlDeviceGetName, handle)
        return GpuReading(
            name=name.decode() if isinstance(name, bytes) else name,
            power_w=None if power_mw is None else power_mw / 1000,
            energy_j=None if energy_mj is None else energy_mj / 1000,
            util_pct=None if util is None else float(util.gpu),
            dram_active=None if util is None else util.memory / 100,
            fb_used_mib=None if memory is None else memory.used / 2**20,
        )

    def _call(self, fn: Any, handle: Any) -> Any:
        """A field the GPU does not support (NVML_ERROR_NOT_SUPPORTED) is None, not an error."""
        try:
            return fn(handle)
        except self.nvml.NVMLError:
            return None

    async def close(self) -> None:
        if self.handles:
            try:
                self.nvml.nvmlShutdown()
            except self.nvml.NVMLError:
                pass


def load_nvml() -> Any:
    """pynvml, from nvidia-ml-py; GpuError (one line) when it is not installed."""
    try:
        return importlib.import_module("pynvml")
    except ImportError:
        raise GpuError("--gpu-metrics nvml needs nvidia-ml-py: pip install 'benchy[gpu]' (or nvidia-ml-py)") from None


# ------------------------------------------------------------------ the option's value


def source_for(spec: str) -> Source:
    """The source --gpu-metrics names; GpuError for a value that is neither a URL nor nvml."""
    if spec.strip().lower() == "nvml":
        return NvmlSource()
    parts = urlsplit(spec.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise GpuError(f"--gpu-metrics takes a dcgm-exporter URL (http://HOST:9400/metrics) or nvml, got {spec!r}")
    path = parts.path if parts.path not in ("", "/") else "/metrics"
    return DcgmSource(urlunsplit((parts.scheme, parts.netloc, path, parts.query, "")))


def check_spec(spec: str | None) -> None:
    """Fails fast (GpuError) on a bad --gpu-metrics value, before anything is sent."""
    if spec is None:
        return
    if spec.strip().lower() == "nvml":
        load_nvml()
        return
    source_for(spec)


def redact(url: str) -> str:
    parts = urlsplit(url)
    netloc = parts.hostname or ""
    if parts.port:
        netloc += f":{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


# ------------------------------------------------------------------ sampling


class GpuSampler:
    """Samples one source for a whole run: `probe()`, `sample_baseline()`, `window()` per case.
    `origin_s` (the first sample's time) is where every case's power series starts counting."""

    def __init__(self, source: Source, interval_s: float = INTERVAL_S, peak: tuple[Any, ...] = (None, None)) -> None:
        self.source = source
        self.interval_s = interval_s
        self.hardware_gbs, self.hardware_note, *stated = peak  # stated: the --hardware profile's name
        self.stated_hardware = stated[0] if stated else None
        self.setup = GpuSetup(source=source.kind, url=source.where, reason="not probed", interval_s=interval_s)
        self.origin_s: float | None = None

    @property
    def available(self) -> bool:
        return self.setup.available

    @property
    def peak_gbs(self) -> float | None:
        return self.setup.peak_bandwidth_gbs

    async def probe(self) -> GpuSetup:
        try:
            sample = await self.source.read()
        except GpuError as exc:
            self.setup = GpuSetup(
                source=self.source.kind, url=self.source.where, reason=str(exc), interval_s=self.interval_s
            )
            return self.setup
        self.origin_s = sample.t_s
        names = [r.name for r in sample.gpus.values()]
        peak, note = figures.peak_bandwidth(self.hardware_gbs, self.hardware_note, names, self.stated_hardware)
        self.setup = GpuSetup(
            source=self.source.kind,
            url=self.source.where,
            available=True,
            interval_s=self.interval_s,
            gpus={g: r.name for g, r in sorted(sample.gpus.items())},
            missing=figures.missing_fields(sample, self.source.names),
            peak_bandwidth_gbs=peak,
            peak_source=note,
            bandwidth_basis=self.source.bandwidth_basis,
        )
        return self.setup

    async def sample_baseline(self, seconds: float = BASELINE_S) -> GpuBaseline:
        """The idle draw before the run (benchy sends nothing meanwhile); kept in setup."""
        window = self.window()
        await window.open()
        await asyncio.sleep(seconds)
        samples = await window.stop()
        idle = figures.baseline(samples, window.failed)
        self.setup = replace(self.setup, baseline=idle)  # the phase after the probe adds it
        return idle

    def window(self) -> GpuWindow:
        return GpuWindow(self)

    async def close(self) -> None:
        await self.source.close()


async def start_sampler(spec: str, peak: tuple[Any, ...] = (None, None), baseline_s: float = BASELINE_S) -> GpuSampler:
    """A probed sampler for --gpu-metrics SPEC, its idle baseline taken (nothing is sent
    meanwhile): what every command that sends load calls first. GpuError (one line) when the
    GPUs cannot be read at all."""
    sampler = GpuSampler(source_for(spec), peak=peak)
    setup = await sampler.probe()
    if not setup.available:
        await sampler.close()
        raise GpuError(f"--gpu-metrics: {setup.reason}")
    await sampler.sample_baseline(baseline_s)
    return sampler


class GpuWindow:
    """One case's samples: one at `open()`, one every interval, one at `close()`; `result` is
    the case's GpuCase (its `unavailable` says what could not be measured, and why)."""

    def __init__(self, sampler: GpuSampler) -> None:
        self.sampler = sampler
        self.samples: list[GpuSample] = []
        self.failed = 0
        self.errors: list[str] = []
        self.edge_failed: list[str] = []
        self._task: asyncio.Future[Any] | None = None
        self.result = GpuCase(sampler.source.kind, unavailable={"power_w": "the case ended before it was sampled"})

    async def open(self) -> None:
        if not await self._take():
            self.edge_failed.append("before")
        self._task = asyncio.ensure_future(self._every_interval())

    async def _take(self) -> bool:
        try:
            self.samples.append(await self.sampler.source.read())
            return True
        except GpuError as exc:
            self.failed += 1
            if str(exc) not in self.errors and len(self.errors) < MAX_ERRORS_KEPT:
                self.errors.append(str(exc))
            return False

    async def _every_interval(self) -> None:
        while len(self.samples) < MAX_SAMPLES:
            await asyncio.sleep(self.sampler.interval_s)
            await self._take()

    async def stop(self) -> list[GpuSample]:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if not await self._take():
            self.edge_failed.append("after")
        return self.samples

    def abort(self) -> None:
        """Stops sampling without a last sample (the case was cut short)."""
        if self._task is not None:
            self._task.cancel()
        self.result = GpuCase(
            self.sampler.source.kind, unavailable={"power_w": "the case was cut short before its last GPU sample"}
        )

    async def close(self) -> None:
        samples = await self.stop()
        s = self.sampler
        self.result = figures.case_figures(
            samples, s.source.kind, self.failed, self.errors, s.peak_gbs, s.origin_s, self.edge_failed
        )
