"""GPU figures (--gpu-metrics, issue 28): dcgm-exporter's text parsed, and power, energy per
token, utilization and bandwidth use measured from `benchy sim --gpus` over real HTTP, judged
against the power its truth log records (every change of draw, per GPU)."""

from __future__ import annotations

import csv
import io
import json

import pytest

from benchy.measure import gpu as figures
from benchy.measure.gpu import GpuReading, GpuSample
from benchy.server.gpu import GpuError, parse_dcgm, source_for
from tests.conftest import run_benchy_here, shared_sim, warning_codes

# dcgm-exporter 3.3 (default counters plus DCGM_FI_PROF_DRAM_ACTIVE), abridged: two GPUs of one host.
DCGM_TEXT = """\
# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).
# TYPE DCGM_FI_DEV_GPU_UTIL gauge
DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-a",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="n1"} 97
DCGM_FI_DEV_GPU_UTIL{gpu="1",UUID="GPU-b",device="nvidia1",modelName="NVIDIA H100 80GB HBM3",Hostname="n1"} 3
# HELP DCGM_FI_DEV_FB_USED Framebuffer memory used (in MiB).
# TYPE DCGM_FI_DEV_FB_USED gauge
DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-a",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="n1"} 72000
DCGM_FI_DEV_FB_USED{gpu="1",UUID="GPU-b",device="nvidia1",modelName="NVIDIA H100 80GB HBM3",Hostname="n1"} 512
# HELP DCGM_FI_DEV_POWER_USAGE Power draw (in W).
# TYPE DCGM_FI_DEV_POWER_USAGE gauge
DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="GPU-a",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="n1"} 612.5
DCGM_FI_DEV_POWER_USAGE{gpu="1",UUID="GPU-b",device="nvidia1",modelName="NVIDIA H100 80GB HBM3",Hostname="n1"} 71.25
# HELP DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION Total energy consumption since boot (in mJ).
# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter
DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu="0",UUID="GPU-a",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="n1"} 123456789012
DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu="1",UUID="GPU-b",device="nvidia1",modelName="NVIDIA H100 80GB HBM3",Hostname="n1"} 98765432
"""


def test_dcgm_text_gives_each_gpu_in_benchys_units_and_names_what_is_missing():
    sample = parse_dcgm(DCGM_TEXT, 1.0)
    assert sorted(sample.gpus) == ["n1/0", "n1/1"]
    busy = sample.gpus["n1/0"]
    assert busy.power_w == 612.5 and busy.util_pct == 97 and busy.fb_used_mib == 72000
    assert busy.energy_j == pytest.approx(123456789.012)  # mJ → J, the counter not rounded
    assert busy.name == "NVIDIA H100 80GB HBM3" and busy.dram_active is None
    missing = figures.missing_fields(sample, {"dram_active": "DCGM_FI_PROF_DRAM_ACTIVE"})
    assert list(missing) == ["dram_active"] and "DCGM_FI_PROF_DRAM_ACTIVE" in missing["dram_active"]


def test_a_bad_gpu_metrics_value_is_refused_with_one_line():
    with pytest.raises(GpuError, match="dcgm-exporter URL"):
        source_for("localhost:9400")
    assert source_for("http://h:9400").url == "http://h:9400/metrics"  # dcgm-exporter's path by default
    assert source_for("http://user:pw@h:9400/metrics").where == "http://h:9400/metrics"  # no credentials kept


def _sample(t: float, watts: float, energy_j: float | None, dram: float | None = 0.5) -> GpuSample:
    return GpuSample(t, {"0": GpuReading("NVIDIA H200", watts, energy_j, 100.0, dram, 1.0)})


def test_energy_comes_from_the_counter_and_else_from_the_integral_of_power():
    counted = figures.case_figures([_sample(0, 300, 0.0), _sample(1, 300, 250.0), _sample(2, 300, 600.0)], "t")
    assert counted.energy_j == 600 and counted.energy_source == "counter" and counted.power_w == 300
    integrated = figures.case_figures([_sample(0, 100, None), _sample(1, 300, None), _sample(2, 300, None)], "t")
    assert integrated.energy_j == pytest.approx(200 + 300) and integrated.energy_source == "power integral"


def test_bandwidth_needs_a_peak_and_dram_activity_and_says_which_is_missing():
    no_peak = figures.case_figures([_sample(0, 1, 0.0), _sample(1, 1, 1.0)], "t")
    assert no_peak.bandwidth_gbs is None and "--hardware" in no_peak.unavailable["bandwidth_gbs"]
    with_peak = figures.case_figures([_sample(0, 1, 0.0), _sample(1, 1, 1.0)], "t", peak_gbs=4800)
    assert with_peak.bandwidth_gbs == pytest.approx(2400) and with_peak.bandwidth_pct == pytest.approx(50)
    no_dram = figures.case_figures([_sample(0, 1, 0.0, None), _sample(1, 1, 1.0, None)], "t", peak_gbs=4800)
    assert "DRAM_ACTIVE" in no_dram.unavailable["bandwidth_gbs"]


def test_an_exporter_that_never_changed_during_a_case_gives_no_figures():
    frozen = figures.case_figures([_sample(t, 300, 50.0) for t in range(4)], "dcgm")
    assert frozen.energy_j is None and frozen.power_w is None
    assert "-c 1000" in frozen.unavailable["energy_j"]


def test_a_window_whose_edge_sample_failed_keeps_its_power_and_gives_no_energy():
    """The sample after the case failed (server/gpu.py's window passes its failed edges): the
    samples cover part of the case, so its energy and joules are withheld, its mean power kept;
    the figures made once, with the reasons."""
    samples = [_sample(0, 300, 0.0), _sample(1, 300, 300.0), _sample(2, 300, 600.0)]
    whole = figures.case_figures(samples, "dcgm")
    partial = figures.case_figures(samples, "dcgm", edges=["after"])
    assert whole.energy_j == 600 and partial.power_w == whole.power_w == 300
    assert partial.energy_j is None and "after the case failed" in partial.unavailable["energy_j"]
    assert figures.per_token(partial, 100, 2, 50.0).joules_per_token is None
    assert figures.per_token(whole, 100, 2, 50.0).joules_per_token == 6.0


def test_gpu_names_find_their_hardware_profile():
    assert figures.profile_for("NVIDIA H200").name == "h200"
    assert figures.profile_for("NVIDIA Unknown 9000") is None
    peak, why = figures.peak_bandwidth(None, None, ["NVIDIA Unknown 9000"])
    assert peak is None and "NVIDIA Unknown 9000" in why


# ------------------------------------------------------------------ against the simulator's truth


def truth_power(truth: list[dict]) -> list[tuple[float, list[float]]]:
    return [(t["gpu_power"]["t_s"], t["gpu_power"]["watts"]) for t in truth if "gpu_power" in t]


def truth_energy(changes: list[tuple[float, list[float]]], start: float, end: float) -> float:
    """Joules of every GPU over [start, end], the draw held between the logged changes."""
    joules = 0.0
    for i, (t, watts) in enumerate(changes):
        until = changes[i + 1][0] if i + 1 < len(changes) else end
        lo, hi = max(t, start), min(until, end)
        if hi > lo:
            joules += sum(watts) * (hi - lo)
    return joules


def case_truth(sim, case: dict) -> tuple[list[dict], float, float]:
    """The case's measured requests in the truth log, and its span: first arrival to last token."""
    ids = {r["request_id"] for r in case["requests"] if not r["warmup"]}
    mine = [t for t in sim.truth(expect=len(ids)) if t.get("request_id") in ids]
    assert len(mine) == len(ids)
    return mine, min(t["arrival_s"] for t in mine), max(t["token_times_s"][-1] for t in mine)


def gpu_run(start_sim, tmp_path, *sim_flags: str, run_flags: tuple[str, ...] = (), report=False) -> tuple:
    sim = start_sim("--decode-tps", "200", "--gpus", "2", *sim_flags)
    out = tmp_path / "out"
    run_flags = run_flags if report else (*run_flags, "--no-report")  # most read results.json only
    proc = run_benchy_here(
        "run", "--base-url", sim.base_url, "--quiet", "--output", str(out), "--pp", "256", "--tg", "128",
        "--runs", "4", "--gpu-metrics", sim.base_url.removesuffix("/v1") + "/dcgm/metrics", *run_flags,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return sim, json.loads((out / "results.json").read_text()), out


def test_two_gpus_at_350_w_give_joules_per_token_within_ten_percent_of_the_truth(start_sim, tmp_path):
    sim, results, out = gpu_run(start_sim, tmp_path, "--gpu-watts", "350", "--gpu-idle-watts", "350", report=True)
    case = results["cases"][0]
    gpu = case["gpu"]
    truth, first, last = case_truth(sim, case)
    tokens = sum(t["completion_tokens"] for t in truth)
    watts = sum(truth_power(sim.truth())[0][1])
    assert watts == 700
    assert gpu["joules_per_token"] == pytest.approx(watts * (last - first) / tokens, rel=0.10)
    assert gpu["power_w"] == pytest.approx(watts, rel=0.10) and gpu["energy_source"] == "counter"
    assert all(d["power_w"] == pytest.approx(350, rel=0.10) for d in gpu["gpus"].values())
    assert gpu["output_tokens"] == tokens and gpu["requests"] == len(truth)
    assert gpu["joules_per_request"] == pytest.approx(gpu["joules_per_token"] * tokens / len(truth))
    assert "gpu_idle_dominates" in warning_codes(results, case["label"])  # idle = busy: all of it is idle draw
    assert_reports_show(out, gpu["joules_per_token"])


def assert_reports_show(out, joules_per_token: float) -> None:
    """The table's column, the CSV's, the report's section and figure, and compare's table."""
    rows = list(csv.DictReader(io.StringIO((out / "results.csv").read_text())))
    assert rows and all(float(r["gpu_joules_per_token"]) == pytest.approx(joules_per_token) for r in rows)
    report = (out / "report.md").read_text()
    assert "J/token (GPU W)" in report and "## GPU" in report and (out / "figures" / "gpu_power.png").is_file()
    proc = run_benchy_here("compare", str(out / "results.json"), str(out / "results.json"))
    assert proc.returncode == 0, proc.stderr
    assert "GPU figures" in proc.stdout and f"{joules_per_token:.3g}" in proc.stdout


def test_the_idle_baseline_and_the_marginal_cost_match_the_truth(start_sim, tmp_path):
    sim, results, _ = gpu_run(
        start_sim, tmp_path, "--gpu-watts", "350", "--gpu-idle-watts", "100", "--gpu-dram-active", "0.6",
        run_flags=("--hardware", "h200"),
    )  # fmt: skip
    baseline = results["setup"]["gpu"]["baseline"]
    changes = truth_power(sim.truth())
    assert baseline["power_w"] == pytest.approx(sum(changes[0][1]), rel=0.10)  # nothing ran yet: 2 × 100 W
    case = results["cases"][0]
    gpu = case["gpu"]
    truth, first, last = case_truth(sim, case)
    tokens = sum(t["completion_tokens"] for t in truth)
    energy = truth_energy(changes, first, last)
    assert gpu["energy_j"] == pytest.approx(energy, rel=0.10)
    assert gpu["joules_per_token"] == pytest.approx(energy / tokens, rel=0.10)
    marginal = (energy - baseline["power_w"] * (last - first)) / tokens
    assert gpu["marginal_joules_per_token"] == pytest.approx(marginal, rel=0.10)
    assert gpu["marginal_joules_per_token"] < gpu["joules_per_token"]
    assert "gpu_idle_dominates" not in warning_codes(results)  # 200 W idle of a 700 W case
    busy = sum(t["token_times_s"][-1] - t["admitted_s"] for t in truth) / gpu["window_s"]  # one at a time
    assert gpu["util_pct"] == pytest.approx(100 * busy, rel=0.10)
    assert gpu["bandwidth_gbs"] == pytest.approx(2 * 4800 * 0.6 * busy, rel=0.10)  # the h200 profile's peak


def test_a_missing_counter_integrates_power_and_a_missing_field_is_said(start_sim, tmp_path):
    sim, results, _ = gpu_run(start_sim, tmp_path, "--gpu-watts", "300", "--gpu-omit", "energy", "--gpu-omit", "dram")
    assert set(results["setup"]["gpu"]["missing"]) == {"energy_j", "dram_active"}
    case = results["cases"][0]
    gpu = case["gpu"]
    truth, first, last = case_truth(sim, case)
    assert gpu["energy_source"] == "power integral"
    assert gpu["energy_j"] == pytest.approx(truth_energy(truth_power(sim.truth()), first, last), rel=0.10)
    assert gpu["bandwidth_gbs"] is None and "DRAM_ACTIVE" in gpu["unavailable"]["bandwidth_gbs"]


def test_failed_scrapes_are_counted_and_said_never_a_silent_zero(start_sim, tmp_path):
    _, results, _ = gpu_run(start_sim, tmp_path, "--gpu-fail-every", "3")
    failed = [c["gpu"] for c in results["cases"] if c["gpu"]["failed_samples"]]
    assert failed, "every third scrape fails: some case must have seen one"
    for gpu in failed:
        assert any("HTTP 500" in e for e in gpu["sample_errors"])
    for case in (c for c in results["cases"] if c["gpu"]["failed_samples"]):
        assert "gpu_samples_failed" in warning_codes(results, case["label"])
    for case in results["cases"]:
        gpu = case["gpu"]
        assert gpu["energy_j"] is None or gpu["energy_j"] > 0
        if gpu["energy_j"] is None:
            assert "failed" in gpu["unavailable"]["energy_j"]


# A simulator without GPUs for the tests of --gpu-metrics that cannot be read (no truth read).
plain_sim = shared_sim()


@pytest.mark.parametrize(
    ("value", "words"),
    [("localhost:9400", "dcgm-exporter URL"), ("http://127.0.0.1:9/metrics", "--gpu-metrics: GET")],
)
def test_gpu_metrics_that_cannot_be_read_stop_the_run_with_one_line(plain_sim, value, words):
    sim = plain_sim
    proc = run_benchy_here(
        "run", "--base-url", sim.base_url, "--quiet", "--pp", "64", "--tg", "8", "--gpu-metrics", value
    )
    assert proc.returncode != 0 and words in proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_a_prometheus_endpoint_that_is_not_dcgm_is_named_as_such(plain_sim):
    sim = plain_sim
    metrics = sim.base_url.removesuffix("/v1") + "/metrics"  # vLLM's names, no DCGM_FI_
    proc = run_benchy_here(
        "run", "--base-url", sim.base_url, "--quiet", "--pp", "64", "--tg", "8", "--gpu-metrics", metrics
    )
    assert proc.returncode != 0 and "no DCGM_FI_ field" in proc.stderr and "Traceback" not in proc.stderr


def test_nvml_without_nvidia_ml_py_is_one_line():
    try:
        import pynvml  # noqa: F401

        pytest.skip("nvidia-ml-py is installed here")
    except ImportError:
        pass
    proc = run_benchy_here("run", "--pp", "64", "--tg", "8", "--gpu-metrics", "nvml")
    assert proc.returncode == 2 and "nvidia-ml-py" in proc.stderr and "Traceback" not in proc.stderr


def test_probe_cache_samples_the_gpus_over_each_length(start_sim, tmp_path):
    sim = start_sim("--gpus", "1", "--gpu-watts", "300", "--gpu-idle-watts", "300", "--prefill-tps", "20000")
    proc = run_benchy_here(
        "probe-cache", "--base-url", sim.base_url, "--quiet", "--lengths", "2000", "-n", "3", "--format", "json",
        "--gpu-metrics", sim.base_url.removesuffix("/v1") + "/dcgm/metrics",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    probe = json.loads(proc.stdout)
    assert probe["setup"]["gpu"]["baseline"]["power_w"] == pytest.approx(300, rel=0.10)
    (entry,) = probe["lengths"]
    ids = set(entry["shared"]["request_ids"] + entry["unique"]["request_ids"])
    truth = [t for t in sim.truth(expect=len(ids)) if t.get("request_id") in ids]
    span = max(t["token_times_s"][-1] for t in truth) - min(t["arrival_s"] for t in truth)
    gpu = entry["gpu"]
    # The window opens before the length's first request and closes after its last (building
    # the prompts in between takes longer on a busy machine): it holds the truth's span, and at
    # a constant 300 W its energy is 300 W × the window, shared by the requests.
    assert gpu["window_s"] >= 0.95 * span
    assert gpu["energy_j"] == pytest.approx(300 * gpu["window_s"], rel=0.10)
    assert gpu["joules_per_request"] == pytest.approx(gpu["energy_j"] / len(truth), rel=1e-6)


class _FakeNvml:
    """NVML's calls as nvidia-ml-py names them, for one GPU that lacks the energy counter."""

    class NVMLError(Exception):
        pass

    @staticmethod
    def nvmlDeviceGetUtilizationRates(handle):
        return type("Util", (), {"gpu": 87, "memory": 41})()

    @staticmethod
    def nvmlDeviceGetMemoryInfo(handle):
        return type("Mem", (), {"used": 3 * 2**30})()

    @staticmethod
    def nvmlDeviceGetPowerUsage(handle):
        return 412_345  # mW

    @classmethod
    def nvmlDeviceGetTotalEnergyConsumption(cls, handle):
        raise cls.NVMLError("Not Supported")

    @staticmethod
    def nvmlDeviceGetName(handle):
        return b"NVIDIA H200"


def test_nvml_readings_are_converted_and_an_unsupported_field_is_absent_not_zero():
    from benchy.server.gpu import NvmlSource

    source = NvmlSource.__new__(NvmlSource)  # without loading the real library
    source.nvml, source.handles = _FakeNvml, ["h0"]
    reading = source.read_now().gpus["0"]
    assert reading.power_w == pytest.approx(412.345) and reading.energy_j is None
    assert reading.util_pct == 87 and reading.dram_active == pytest.approx(0.41)
    assert reading.fb_used_mib == 3 * 1024 and reading.name == "NVIDIA H200"
