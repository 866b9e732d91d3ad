"""The simulator's GPUs: dcgm-exporter-shaped metrics whose power is known exactly.

Why: benchy's GPU figures (energy per token, average power, bandwidth use) must be judged
against a truth, not a constant. Each simulated GPU draws `gpu_watts` while at least one
request holds a slot and `gpu_idle_watts` otherwise; the energy counter integrates exactly
that; utilization and DRAM activity are the busy share of the time since the last scrape
(× gpu_dram_active), averages over the exporter's interval as DCGM's are; and every change of draw is written to the truth log as
`{"gpu_power": {"t_s": perf_counter, "watts": [per GPU]}}`, so a test integrates the truth
over any window. The text has dcgm-exporter's names, types, units and labels (gpu, UUID,
modelName, Hostname); fields can be left out and scrapes made to fail, for the honest edges.
"""

from __future__ import annotations

from collections.abc import Callable

from benchy.jsontypes import JsonObject
from benchy.sim.config import SimConfig

HOSTNAME = "benchy-sim"
# (field flag, dcgm name, type, help): the order dcgm-exporter's default counters list them.
FIELDS = (
    ("power", "DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W)."),
    ("energy", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", "Total energy consumption since boot (in mJ)."),
    ("util", "DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %)."),
    ("dram", "DCGM_FI_PROF_DRAM_ACTIVE", "gauge", "Ratio of cycles the device memory interface is active."),
    ("fb", "DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB)."),
)
FB_USED_MIB = 81920.0
# --throttle: the SM clock falls with the engine's heat factor, the temperature rises, and the
# exporter says why (NVML's sw_thermal_slowdown bit). Exported only with --throttle.
BOOST_MHZ = 1980.0
COOL_C, HOT_C = 45.0, 88.0
SW_THERMAL_SLOWDOWN = 0x20


class SimGpus:
    """The GPUs' state: busy while any request runs; energy integrated at every change."""

    def __init__(
        self, cfg: SimConfig, now: float, note: Callable[[JsonObject], None], heat: Callable[[], float] = lambda: 1.0
    ) -> None:
        self.cfg = cfg
        self.heat = heat  # the engine's decode rate factor now (1.0: cool; sim/engine.py)
        self.note = note  # writes a truth-log line
        self.busy = False
        self.since_s = now
        self.energy_mj = [0.0] * cfg.gpus
        self.busy_s = 0.0  # seconds busy since start
        self.scrapes = 0
        self.last_scrape = (now, 0.0)  # (t, busy_s) at the last scrape answered
        self.note({"gpu_power": {"t_s": now, "watts": self.watts()}})

    def watts(self) -> list[float]:
        each = self.cfg.gpu_watts if self.busy else self.cfg.gpu_idle_watts
        return [each] * self.cfg.gpus

    def advance(self, now: float) -> None:
        elapsed = max(0.0, now - self.since_s)
        self.energy_mj = [e + 1000.0 * w * elapsed for e, w in zip(self.energy_mj, self.watts())]
        self.busy_s += elapsed if self.busy else 0.0
        self.since_s = now

    def busy_share(self, now: float) -> float:
        """The share of the time since the last scrape that the GPUs were busy: utilization and
        DRAM activity are averages over the exporter's interval, as DCGM's are."""
        then, busy_then = self.last_scrape
        self.last_scrape = (now, self.busy_s)
        if now <= then:
            return 1.0 if self.busy else 0.0
        return min(1.0, (self.busy_s - busy_then) / (now - then))

    def running(self, now: float, running: int) -> None:
        """A slot was taken or given back: the draw changes when the GPUs go busy or idle."""
        busy = running > 0
        if busy == self.busy:
            return
        self.advance(now)
        self.busy = busy
        self.note({"gpu_power": {"t_s": now, "watts": self.watts()}})

    def scrape(self, now: float) -> str | None:
        """The exporter's text now; None for a scrape that is made to fail."""
        self.scrapes += 1
        if self.cfg.gpu_fail_every and self.scrapes % self.cfg.gpu_fail_every == 0:
            return None
        self.advance(now)
        share = self.busy_share(now)
        values: dict[str, list[float]] = {
            "power": self.watts(),
            "energy": [round(e) for e in self.energy_mj],
            "util": [round(100.0 * share, 3)] * self.cfg.gpus,
            "dram": [round(self.cfg.gpu_dram_active * share, 5)] * self.cfg.gpus,
            "fb": [FB_USED_MIB] * self.cfg.gpus,
        }
        lines = []
        for flag, name, kind, doc in FIELDS:
            if flag in self.cfg.gpu_omit:
                continue
            lines += [f"# HELP {name} {doc}", f"# TYPE {name} {kind}"]
            lines += [f"{name}{{{self._labels(i)}}} {_number(v)}" for i, v in enumerate(values[flag])]
        if self.cfg.throttle:
            lines += self._thermal()
        return "\n".join(lines) + "\n"

    def _thermal(self) -> list[str]:
        factor = self.heat()
        lost = (1.0 - factor) / self.cfg.throttle  # 0 cool … 1 fully throttled
        reasons = SW_THERMAL_SLOWDOWN if factor < 1.0 else 0
        out = []
        for name, value in (
            ("DCGM_FI_DEV_SM_CLOCK", round(BOOST_MHZ * factor)),
            ("DCGM_FI_DEV_GPU_TEMP", round(COOL_C + (HOT_C - COOL_C) * lost)),
            ("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", reasons),
        ):
            out += [f"# TYPE {name} gauge"] + [f"{name}{{{self._labels(i)}}} {value}" for i in range(self.cfg.gpus)]
        return out

    def _labels(self, i: int) -> str:
        return (
            f'gpu="{i}",UUID="GPU-00000000-0000-0000-0000-{i:012d}",pci_bus_id="00000000:{i + 1:02X}:00.0",'
            f'device="nvidia{i}",modelName="{self.cfg.gpu_model}",Hostname="{HOSTNAME}",'
            'DCGM_FI_DRIVER_VERSION="sim"'
        )


def _number(value: float) -> str:
    """Exactly, as the exporter prints it (a large counter never in e-notation)."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))
