"""The GPU's side of a case: power, energy, utilization and memory-bandwidth use, from samples.

Why: a rate alone does not say what a token costs or how close the server runs to the memory
bandwidth it has. dcgm-exporter (or NVML on the server's own host) reads both from the GPUs;
this module turns the samples taken during a case into figures for exactly that case. It is
pure (no I/O): server/gpu.py takes the samples, results/build.py divides by the case's tokens.

Definitions, for a case window from the first sample t_0 to the last t_n, over every GPU g:
  energy_j       Σ_g (counter_g(t_n) − counter_g(t_0)) where every GPU has the energy counter
                 (DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION, mJ; NVML's total energy), else the
                 trapezoid integral of the sampled power: `energy_source` says which
  power_w        energy_j ÷ (t_n − t_0): the average draw of all GPUs; per GPU the same
  util_pct, dram_active   time-weighted means of the samples, each standing for the interval
                 before it, as the sources average them (dram_active: share of cycles the
                 memory interface was busy, 0…1; NVML's memory utilization ÷ 100)
  bandwidth_gbs  Σ_g dram_active_g × the GPU's peak bandwidth (hardware profile): measured use
  joules_per_token   energy_j ÷ output tokens of the case's measured requests (build.py)
  marginal_joules_per_token   (energy_j − idle power × window) ÷ output tokens: what the load
                 added above the baseline sampled before the run, so an idle GPU's draw is not
                 mistaken for the cost of a token
A figure a source does not publish is Unavailable with the reason; a sample that failed is
counted, never taken as zero.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from benchy.jsontypes import Saved
from benchy.measure import profiles, registry
from benchy.measure.unavailable import NO_ENERGY, Unavailable
from benchy.measure.window_formulas import EnergyWindow

FIELDS = ("power_w", "energy_j", "util_pct", "dram_active", "fb_used_mib")
MAX_SERIES_POINTS = 2000  # the power-over-time series kept per case (for the report figure)


@dataclass
class GpuReading:
    """One GPU at one moment; None where the source does not publish the field."""

    name: str | None = None  # the GPU's model name, e.g. "NVIDIA H200"
    power_w: float | None = None
    energy_j: float | None = None  # cumulative since the driver loaded
    util_pct: float | None = None
    dram_active: float | None = None  # 0…1
    fb_used_mib: float | None = None
    sm_clock_mhz: float | None = None
    temp_c: float | None = None
    throttle_reasons: float | None = None  # NVML's clocks-event bitmask (THROTTLE_REASONS below)


@dataclass
class GpuSample:
    """Every GPU at perf_counter time `t_s`."""

    t_s: float
    gpus: dict[str, GpuReading] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class GpuDevice(Saved):
    """One GPU's figures for a case."""

    name: str | None = None
    power_w: float | None = None
    energy_j: float | None = None
    util_pct: float | None = None
    dram_active: float | None = None
    bandwidth_gbs: float | None = None
    fb_used_mib_max: float | None = None


# NVML's clock-event (throttle) reasons, bit by bit; gpu_idle is no slowdown under load.
THROTTLE_REASONS = {
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
}


@dataclass(frozen=True, slots=True)
class GpuThermal(Saved):
    """(1.14) The GPUs' SM clock and temperature at the case's first and last sample (mean over
    GPUs), and the throttle reasons any sample gave: what a drift of the case's rates is set beside."""

    sm_clock_mhz_first: float | None = None
    sm_clock_mhz_last: float | None = None
    temp_c_first: float | None = None
    temp_c_last: float | None = None
    throttle_reasons: list[str] = field(default_factory=list)


def thermal(samples: list[GpuSample]) -> GpuThermal | None:
    """None where no sample published a clock or a temperature."""

    def at(sample: GpuSample, name: str) -> float | None:
        values = [v for r in sample.gpus.values() if (v := getattr(r, name)) is not None]
        return sum(values) / len(values) if values else None

    def ends(name: str) -> tuple[float | None, float | None]:
        seen = [v for s in samples if (v := at(s, name)) is not None]
        return (seen[0], seen[-1]) if seen else (None, None)

    clock, temp = ends("sm_clock_mhz"), ends("temp_c")
    if clock == (None, None) and temp == (None, None):
        return None
    bits = 0
    for s in samples:
        for r in s.gpus.values():
            bits |= int(r.throttle_reasons or 0)
    reasons = [name for bit, name in THROTTLE_REASONS.items() if bits & bit]
    return GpuThermal(clock[0], clock[1], temp[0], temp[1], reasons)


@dataclass(frozen=True, slots=True)
class GpuCase(Saved):
    """A case's GPU figures (the `gpu` entry of a case in results.json, 1.6)."""

    source: str = ""  # "dcgm" | "nvml" | "sim"
    window_s: float = 0.0
    samples: int = 0
    failed_samples: int = 0
    sample_errors: list[str] = field(default_factory=list)  # the distinct reasons, first few
    gpus: dict[str, GpuDevice] = field(default_factory=dict)
    power_w: float | None = None
    energy_j: float | None = None
    energy_source: str | None = None  # "counter" | "power integral"
    util_pct: float | None = None
    dram_active: float | None = None
    bandwidth_gbs: float | None = None
    peak_bandwidth_gbs: float | None = None  # all GPUs together
    bandwidth_pct: float | None = None  # measured use as a % of the peak
    idle_power_w: float | None = None  # the baseline sampled before the run
    output_tokens: int | None = None
    requests: int | None = None
    joules_per_token: float | None = None
    joules_per_request: float | None = None
    marginal_joules_per_token: float | None = None
    series: list[list[float]] = field(default_factory=list)  # [s since the run's first sample, W]
    thermal: GpuThermal | None = None  # (1.14) clocks, temperature, throttle reasons where published
    unavailable: dict[str, str] = field(default_factory=dict)  # figure → why


@dataclass(frozen=True, slots=True)
class GpuBaseline(Saved):
    """The GPUs' draw with benchy sending nothing, sampled before the first case."""

    power_w: float | None = None
    window_s: float = 0.0
    samples: int = 0
    gpus: dict[str, float | None] = field(default_factory=dict)  # GPU → W
    unavailable: str | None = None
    failed_samples: int = 0


@dataclass(frozen=True, slots=True)
class GpuSetup(Saved):
    """What the GPU source offered for this run (setup.gpu, 1.6)."""

    source: str = ""  # "dcgm" | "nvml"
    url: str | None = None  # dcgm-exporter's endpoint, credentials removed
    available: bool = False
    reason: str | None = None  # why there are no GPU figures
    interval_s: float = 0.0
    gpus: dict[str, str | None] = field(default_factory=dict)  # GPU → model name
    missing: dict[str, str] = field(default_factory=dict)  # field → why absent
    peak_bandwidth_gbs: float | None = None  # per GPU
    peak_source: str | None = None
    bandwidth_basis: str | None = None  # what the source's memory activity measures
    baseline: GpuBaseline | None = None


# ------------------------------------------------------------------ figures


def missing_fields(sample: GpuSample, source_names: dict[str, str]) -> dict[str, str]:
    """{field: why} for the fields no GPU of the sample has; `source_names` names them."""
    out = {}
    for name in FIELDS:
        if all(getattr(r, name) is None for r in sample.gpus.values()):
            out[name] = f"{source_names.get(name, name)} is not published"
    return out


def peak_bandwidth(
    hardware_gbs: float | None, hardware_note: str | None, names: list[str | None], stated: str | None = None
) -> tuple[Any, ...]:
    """(GB/s per GPU, where it came from): the run's --hardware / --bandwidth-gbs, else the
    profile the GPU's own model name matches; (None, why) when neither is known. A --hardware
    profile (`stated`) that the GPUs contradict gives way to theirs (contradiction)."""
    against = contradiction(stated, names) if hardware_gbs else None
    if against is not None:
        measured, reported = against
        if measured is None:
            return None, unknown_contradiction(stated or "", reported)
        return measured.bandwidth_gbs, overruled(stated or "", measured, reported)
    if hardware_gbs:
        return hardware_gbs, hardware_note or "--hardware"
    for name in names:
        found = profile_for(name)
        if found is not None:
            return found.bandwidth_gbs, f"profile {found.name} (the GPU reports {name!r})"
    said = ", ".join(sorted({n for n in names if n})) or "no model name"
    return None, f"no hardware profile matches the GPU ({said}): pass --hardware or --bandwidth-gbs"


def profile_for(name: str | None) -> profiles.Hardware | None:
    """The hardware profile a GPU model name matches ("NVIDIA H200" → h200), or None."""
    if not name:
        return None
    key = name.strip()
    for candidate in (key, key.removeprefix("NVIDIA ").removeprefix("nvidia ")):
        try:
            return profiles.hardware(candidate)
        except profiles.ProfileError:
            continue
    return None


def names_device(hardware: str, names: Iterable[str | None]) -> bool:
    """Whether a GPU's own name is the `hardware` profile's device: what confirms a stated
    --hardware (a profile's bandwidth is otherwise the user's word for it)."""
    return any(p is not None and p.name == hardware for p in map(profile_for, names))


def contradiction(stated: str | None, names: Iterable[str | None]) -> tuple[profiles.Hardware | None, str] | None:
    """(the GPU's own profile, or None where none matches it; the name it reports) where the
    --hardware profile `stated` names another device than the GPUs do; None where a GPU is the
    stated one or no GPU says otherwise. Why: a stated device sets the bandwidth ceiling, and
    an H200's 4.8 TB/s on an H100 lets an impossible rate pass; the GPU's own name is measured."""
    if not stated:
        return None
    hw = profiles.hardware(stated)
    named = [n for n in names if n]
    found = [(profile_for(n), n) for n in named]
    if any(p is not None and p.name == hw.name for p, _ in found):
        return None
    for profile, name in found:
        if profile is not None:
            return profile, name
        family = _family(name)
        if family is not None and family != _family(hw.name):
            return None, name
    return None


def overruled(stated: str, measured: profiles.Hardware, name: str) -> str:
    """Why the GPU's profile replaced the stated one, in words the output carries."""
    return (
        f"profile {measured.name} ({measured.bandwidth_gbs:,.0f} GB/s): the GPU reports {name!r}, "
        f"not the {stated} --hardware named ({profiles.hardware(stated).bandwidth_gbs:,.0f} GB/s)"
    )


def unknown_contradiction(stated: str, name: str) -> str:
    """Why there is no bandwidth where the GPU contradicts --hardware and no profile knows it."""
    return (
        f"--hardware {stated} names another device than the GPU reports ({name!r}), and no hardware "
        "profile knows that GPU: pass --bandwidth-gbs"
    )


_FAMILY = re.compile(r"(?<![a-z0-9])([a-z]{1,2}\d{2,4})")  # "h100", "a100", "b200", "gb10", "mi300"


def _family(name: str) -> str | None:
    """The chip a device name or profile names ("NVIDIA H100 NVL" → h100), None where unsure."""
    found = _FAMILY.search(name.strip().lower().removeprefix("nvidia "))
    return found.group(1) if found else None


def baseline(samples: list[GpuSample], failed: int = 0) -> GpuBaseline:
    """The idle draw: the mean of the sampled power (counter-derived where it exists);
    `failed`: the samples that could not be taken."""
    if not samples:
        return GpuBaseline(unavailable="no sample could be taken before the run", failed_samples=failed)
    ids = sorted({g for s in samples for g in s.gpus})
    per_gpu = {g: _gpu_power(samples, g) for g in ids}
    known = [w for w in per_gpu.values() if w is not None]
    window = samples[-1].t_s - samples[0].t_s
    if len(known) < len(ids) or not known:
        return GpuBaseline(None, window, len(samples), per_gpu, "the source publishes no power for every GPU", failed)
    return GpuBaseline(sum(known), window, len(samples), per_gpu, failed_samples=failed)


def case_figures(
    samples: list[GpuSample],
    source: str,
    failed: int = 0,
    errors: list[str] | None = None,
    peak_gbs: float | None = None,
    origin_s: float | None = None,
    edges: Sequence[str] = (),
) -> GpuCase:
    """A case's figures from its samples (the first and last bound the window), made once, what
    they cannot say decided first: `edges`, the samples before or after the case that failed
    (partial_window); an exporter that did not collect during the case (stale)."""
    unavailable: dict[str, str] = {}
    counts = (len(samples), failed, list(errors or []))
    if len(samples) < 2:
        unavailable["power_w"] = f"{len(samples)} GPU sample(s) in the case: two are needed (one before, one after)"
        partial_window(unavailable, edges)
        return GpuCase(source, 0.0, *counts, unavailable=unavailable)
    window = samples[-1].t_s - samples[0].t_s
    ids = sorted({g for s in samples for g in s.gpus})
    measured = [_device(samples, g, window, peak_gbs) for g in ids]
    totals = _totals(measured, round(window, 6), peak_gbs, unavailable)
    counted = totals.energy_j is not None
    if len(samples) >= 3 and all(s.gpus == samples[0].gpus for s in samples):
        measured, totals = stale(measured, totals, unavailable)
    partial_window(unavailable, edges)
    return GpuCase(
        source,
        round(window, 6),
        *counts,
        gpus=dict(zip(ids, measured)),
        power_w=totals.power_w,
        energy_j=None if edges else totals.energy_j,
        energy_source=energy_source(samples, ids) if counted else None,
        util_pct=totals.util_pct,
        dram_active=totals.dram_active,
        bandwidth_gbs=totals.bandwidth_gbs,
        peak_bandwidth_gbs=totals.peak_bandwidth_gbs,
        bandwidth_pct=totals.bandwidth_pct,
        series=_series(samples, samples[0].t_s if origin_s is None else origin_s),
        thermal=thermal(samples),
        unavailable=unavailable,
    )


def _device(samples: list[GpuSample], g: str, window: float, peak_gbs: float | None) -> GpuDevice:
    readings = [s.gpus.get(g) for s in samples]
    name = next((r.name for r in readings if r is not None and r.name), None)
    energy, _ = _gpu_energy(samples, g)
    dram = _mean(samples, g, "dram_active")
    fb = [r.fb_used_mib for r in readings if r is not None and r.fb_used_mib is not None]
    return GpuDevice(
        name=name,
        power_w=None if energy is None or window <= 0 else energy / window,
        energy_j=energy,
        util_pct=_mean(samples, g, "util_pct"),
        dram_active=dram,
        bandwidth_gbs=None if dram is None or not peak_gbs else dram * peak_gbs,
        fb_used_mib_max=max(fb) if fb else None,
    )


@dataclass(frozen=True)
class _Totals:
    """The case's figures over all its GPUs, before they are made a GpuCase."""

    energy_j: float | None = None
    power_w: float | None = None
    util_pct: float | None = None
    dram_active: float | None = None
    peak_bandwidth_gbs: float | None = None
    bandwidth_gbs: float | None = None
    bandwidth_pct: float | None = None


def _totals(devices: list[GpuDevice], window_s: float, peak_gbs: float | None, unavailable: dict[str, str]) -> _Totals:
    """Sums and means over the GPUs; where one lacks a figure, why (into `unavailable`)."""
    energies = [d.energy_j for d in devices]
    energy = power = util = None
    if devices and all(e is not None for e in energies):
        energy = sum(e for e in energies if e is not None)
        power = energy / window_s if window_s > 0 else None
    else:
        unavailable["power_w"] = unavailable["energy_j"] = "the source publishes no power for every GPU"
    utils = [d.util_pct for d in devices]
    if devices and all(u is not None for u in utils):
        util = sum(u for u in utils if u is not None) / len(utils)
    else:
        unavailable["util_pct"] = "the source publishes no GPU utilization"
    return _bandwidth(_Totals(energy, power, util), devices, peak_gbs, unavailable)


def _bandwidth(
    totals: _Totals, devices: list[GpuDevice], peak_gbs: float | None, unavailable: dict[str, str]
) -> _Totals:
    drams = [d.dram_active for d in devices]
    if not devices or any(d is None for d in drams):
        unavailable["bandwidth_gbs"] = "the source publishes no memory activity (DCGM_FI_PROF_DRAM_ACTIVE)"
        return totals
    dram = sum(d for d in drams if d is not None) / len(drams)
    if not peak_gbs:
        unavailable["bandwidth_gbs"] = "no peak bandwidth for the GPU: pass --hardware or --bandwidth-gbs"
        return replace(totals, dram_active=dram)
    peak = peak_gbs * len(devices)
    used = sum(d.bandwidth_gbs or 0.0 for d in devices)
    return replace(
        totals, dram_active=dram, peak_bandwidth_gbs=peak, bandwidth_gbs=used, bandwidth_pct=100.0 * used / peak
    )


def _gpu_energy(samples: list[GpuSample], g: str) -> tuple[float | None, str | None]:
    """(joules, source) of one GPU over the samples: the counter, else the power integral."""
    first, last = samples[0].gpus.get(g), samples[-1].gpus.get(g)
    if first is not None and last is not None and first.energy_j is not None and last.energy_j is not None:
        delta = last.energy_j - first.energy_j
        if delta >= 0:
            return delta, "counter"
    points = _points(samples, g, "power_w")
    if len(points) < 2:
        return None, None
    return sum((t1 - t0) * (w0 + w1) / 2 for (t0, w0), (t1, w1) in zip(points, points[1:])), "power integral"


def energy_source(samples: list[GpuSample], ids: list[str]) -> str | None:
    """Counter, power integral, or both when the GPUs differ."""
    sources = {_gpu_energy(samples, g)[1] for g in ids}
    sources.discard(None)
    return sources.pop() if len(sources) == 1 else ("counter and power integral" if sources else None)


def _gpu_power(samples: list[GpuSample], g: str) -> float | None:
    window = samples[-1].t_s - samples[0].t_s
    energy, _ = _gpu_energy(samples, g) if len(samples) >= 2 else (None, None)
    if energy is not None and window > 0:
        return energy / window
    powers = [w for _, w in _points(samples, g, "power_w")]
    return sum(powers) / len(powers) if powers else None


def _points(samples: list[GpuSample], g: str, name: str) -> list[tuple[float, float]]:
    """(t, value) of one GPU's field, where the sample has it."""
    out = []
    for s in samples:
        value = getattr(s.gpus[g], name) if g in s.gpus else None
        if value is not None:
            out.append((s.t_s, float(value)))
    return out


def _mean(samples: list[GpuSample], g: str, name: str) -> float | None:
    """Time-weighted mean of a gauge that the source averages over the time since its last
    reading (NVML's and DCGM's utilization and DRAM activity are): each sample stands for the
    interval before it, so the first one, which describes time before the window, is left out.
    The plain mean when fewer than two samples carry it."""
    points = _points(samples, g, name)
    if not points:
        return None
    span = points[-1][0] - points[0][0]
    if len(points) == 1 or span <= 0:
        return sum(v for _, v in points) / len(points)
    return sum((t1 - t0) * v1 for (t0, _), (t1, v1) in zip(points, points[1:])) / span


def _series(samples: list[GpuSample], origin_s: float) -> list[list[float]]:
    """[t since origin, total W] at each sample with every GPU's power, thinned to a bound."""
    points = []
    for s in samples:
        watts = [r.power_w for r in s.gpus.values()]
        if watts and all(w is not None for w in watts):
            points.append([round(s.t_s - origin_s, 4), round(sum(w for w in watts if w is not None), 3)])
    step = max(1, len(points) // MAX_SERIES_POINTS + (len(points) % MAX_SERIES_POINTS > 0))
    return points[::step]


def per_token(window: GpuCase, output_tokens: int, requests: int, idle_power_w: float | None) -> GpuCase:
    """The window's figures with joules per output token and per request, and the marginal cost
    above the idle baseline: a new GpuCase, the window as gathered left as it was (a rebuild reads
    it again). The figures are the registry's (level gpu_window), made from the energy in its order."""
    energy: float | Unavailable = (
        window.energy_j
        if window.energy_j is not None
        else Unavailable(NO_ENERGY, window.unavailable.get("energy_j", "no energy figure for the case"))
    )
    inputs = EnergyWindow(output_tokens, requests, idle_power_w, window.window_s)
    values = registry.compute(registry.GPU_WINDOW, inputs, {"gpu_energy_j": energy})
    figures: dict[str, Any] = {}  # GpuCase's fields by the registry's keys
    unavailable = dict(window.unavailable)
    for metric in registry.of_level(registry.GPU_WINDOW):
        if metric.formula is None:
            continue
        value = values[metric.name]
        if isinstance(value, Unavailable):
            unavailable[metric.key] = value.message
        else:
            figures[metric.key] = value
    made = replace(
        window, output_tokens=output_tokens, requests=requests, idle_power_w=idle_power_w, unavailable=unavailable
    )
    return replace(made, **figures)


ENERGY_FIGURES = ("energy_j", "joules_per_token", "joules_per_request", "marginal_joules_per_token")


def partial_window(unavailable: dict[str, str], edges: Sequence[str]) -> None:
    """The sample before or after the case failed: the samples cover only part of it, so no
    energy figure is given (the average power of the part sampled stays). Into the case's
    reasons as case_figures gathers them."""
    if not edges:
        return
    which = " and ".join(edges)
    for name in ENERGY_FIGURES:
        unavailable[name] = f"the GPU sample {which} the case failed: the energy would cover only part of it"


def stale(devices: list[GpuDevice], totals: _Totals, unavailable: dict[str, str]) -> tuple[list[GpuDevice], _Totals]:
    """An exporter whose values never changed during a case has not collected in that time
    (dcgm-exporter collects every 30 s unless told otherwise): its figures are not the case's."""
    why = "the GPU figures did not change during the case: the exporter collects less often than that (-c 1000)"
    for name in ("power_w", *ENERGY_FIGURES, "util_pct", "bandwidth_gbs"):
        unavailable[name] = why
    unmeasured = [replace(d, power_w=None, energy_j=None, bandwidth_gbs=None) for d in devices]
    return unmeasured, replace(totals, energy_j=None, power_w=None, bandwidth_gbs=None, bandwidth_pct=None)
