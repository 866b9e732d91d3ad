"""A stated hardware that the GPU contradicts (issue 52, item 7): `--hardware h200` where the GPU
names itself an H100. The GPU's own name is measured (NVML or dcgm-exporter), the stated one is
not: the ceiling and the GPU's peak bandwidth follow the GPU's profile and the output says the
stated hardware was set aside; a GPU no profile knows leaves no ceiling, said. NVML is faked at
its module boundary (nvidia-ml-py's `pynvml`, as tests/test_gpu.py fakes it); dcgm-exporter's
names come from `benchy sim --gpu-model` over real HTTP."""

from __future__ import annotations

import json
import types

import pytest

from benchy.measure import gpu as figures
from benchy.measure.ceiling import CeilingInputs
from tests.conftest import run_benchy_here, warning_codes

H100_NVML = "NVIDIA H100 80GB HBM3"  # what NVML names an H100 SXM5 board


def fake_pynvml(name: str) -> types.ModuleType:
    """nvidia-ml-py's calls for one GPU that names itself `name`."""
    nvml = types.ModuleType("pynvml")

    class NVMLError(Exception):
        pass

    def unsupported(handle):
        raise NVMLError("Not Supported")

    nvml.NVMLError = NVMLError
    nvml.nvmlInit = lambda: None
    nvml.nvmlShutdown = lambda: None
    nvml.nvmlDeviceGetCount = lambda: 1
    nvml.nvmlDeviceGetHandleByIndex = lambda i: f"h{i}"
    nvml.nvmlDeviceGetUtilizationRates = lambda h: types.SimpleNamespace(gpu=50, memory=20)
    nvml.nvmlDeviceGetMemoryInfo = lambda h: types.SimpleNamespace(used=2**30)
    nvml.nvmlDeviceGetPowerUsage = lambda h: 300_000  # mW
    nvml.nvmlDeviceGetTotalEnergyConsumption = unsupported
    nvml.nvmlDeviceGetName = lambda h: name.encode()
    return nvml


def test_a_stated_hardware_gives_way_to_the_gpus_own_profile():
    stated = CeilingInputs(hardware="h200", model_profile="llama-3-8b")
    assert stated.resolve("m").bandwidth_gbs == 4800  # nothing measured: the stated one stands
    overruled = stated.resolve("m", [H100_NVML])
    assert (overruled.hardware, overruled.bandwidth_gbs) == ("h100-sxm", 3350)
    assert (overruled.stated_hardware, overruled.gpu_reports) == ("h200", H100_NVML)
    assert "h200" in overruled.bandwidth_source and H100_NVML in overruled.bandwidth_source
    same = stated.resolve("m", ["NVIDIA H200"])
    assert same.bandwidth_gbs == 4800 and same.stated_hardware is None
    unknown = stated.resolve("m", ["NVIDIA B300 SXM6"])  # another chip, no profile: no ceiling
    assert unknown.bandwidth_gbs is None and "NVIDIA B300 SXM6" in unknown.missing
    variant = CeilingInputs(hardware="h100-sxm").resolve("m", ["NVIDIA H100 NVL"])  # same chip, no profile
    assert variant.bandwidth_gbs == 3350 and variant.stated_hardware is None
    figure = CeilingInputs(hardware="h200", bandwidth_gbs=4000).resolve("m", [H100_NVML])
    assert figure.bandwidth_gbs == 4000 and figure.stated_hardware is None  # a stated figure stands


def test_the_peak_bandwidth_follows_the_gpu_not_the_stated_hardware():
    peak, why = figures.peak_bandwidth(4800, "--hardware", [H100_NVML], "h200")
    assert peak == 3350 and "h200" in why and H100_NVML in why
    assert figures.peak_bandwidth(4800, "--hardware", ["NVIDIA H200"], "h200") == (4800, "--hardware")
    assert figures.peak_bandwidth(4000, "--bandwidth-gbs", [H100_NVML], None) == (4000, "--bandwidth-gbs")


def _run(sim, tmp_path, gpu_metrics: str, *flags: str) -> dict:
    out = tmp_path / "out"
    proc = run_benchy_here(
        "run", "--base-url", sim.base_url, "--quiet", "--no-report", "--output", str(out), "--pp", "64",
        "--tg", "16", "--runs", "2", "--model-profile", "llama-3-8b", "--gpu-metrics", gpu_metrics, *flags,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return json.loads((out / "results.json").read_text())


def _ceiling_tps(results: dict) -> float:
    return results["cases"][0]["ceiling"]["tokens_per_s"]


@pytest.mark.parametrize("reports", [H100_NVML, "NVIDIA H200"])
def test_nvml_naming_another_gpu_than_hardware_is_said_and_its_profile_used(start_sim, tmp_path, monkeypatch, reports):
    monkeypatch.setitem(__import__("sys").modules, "pynvml", fake_pynvml(reports))
    sim = start_sim()
    results = _run(sim, tmp_path, "nvml", "--hardware", "h200")
    setup = results["setup"]
    assert setup["gpu"]["gpus"] == {"0": reports}
    if reports == "NVIDIA H200":  # the stated one: nothing to say, the figures as stated
        assert setup["ceiling"]["bandwidth_gbs"] == 4800 and setup["gpu"]["peak_bandwidth_gbs"] == 4800
        assert "hardware_contradicted" not in warning_codes(results)
        return
    assert setup["ceiling"]["bandwidth_gbs"] == 3350 and setup["gpu"]["peak_bandwidth_gbs"] == 3350
    assert setup["hardware"] == "h100-sxm" and setup["ceiling"]["stated_hardware"] == "h200"
    (said,) = [w for w in results["warnings"] if w["code"] == "hardware_contradicted"]
    assert "h200" in said["message"] and H100_NVML in said["message"] and "3,350 GB/s" in said["message"]
    # the case's ceiling is the H100's: weights and KV read per token at 3.35 TB/s
    ceiling = results["cases"][0]["ceiling"]
    read = ceiling["weight_bytes_per_token"] + ceiling["kv_bytes_per_token"]
    assert _ceiling_tps(results) == pytest.approx(3350e9 / read, rel=1e-6)


def test_dcgm_naming_another_gpu_than_hardware_is_said_and_its_profile_used(start_sim, tmp_path):
    sim = start_sim("--gpus", "1", "--gpu-model", H100_NVML)
    results = _run(sim, tmp_path, sim.base_url.removesuffix("/v1") + "/dcgm/metrics", "--hardware", "h200")
    assert results["setup"]["ceiling"]["bandwidth_gbs"] == 3350
    assert "hardware_contradicted" in warning_codes(results)


def test_a_gpu_no_profile_knows_leaves_no_ceiling_and_says_why(start_sim, tmp_path, monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "pynvml", fake_pynvml("NVIDIA B300 SXM6"))
    sim = start_sim()
    results = _run(sim, tmp_path, "nvml", "--hardware", "h200")
    assert results["setup"]["ceiling"]["bandwidth_gbs"] is None and results["cases"][0].get("ceiling") is None
    assert {"hardware_contradicted", "ceiling_unknown"} <= warning_codes(results)
    (said,) = [w for w in results["warnings"] if w["code"] == "ceiling_unknown"]
    assert "NVIDIA B300 SXM6" in said["message"] and "--bandwidth-gbs" in said["message"]


def test_a_stated_hardware_is_confirmed_only_by_a_gpus_own_name():
    """Without a GPU name read, --hardware is the user's word: saved as unconfirmed, never as
    measured; the GPU's own name confirms it, or (another device) replaces it."""
    stated = CeilingInputs(hardware="h200", model_profile="llama-3-8b")
    assert stated.resolve("m").hardware_confirmed is False
    assert stated.resolve("m", ["NVIDIA H200"]).hardware_confirmed is True
    assert stated.resolve("m", [H100_NVML]).hardware_confirmed is True  # the H100's own profile now
    variant = CeilingInputs(hardware="h100-sxm").resolve("m", ["NVIDIA H100 NVL"])  # no profile names it
    assert variant.hardware == "h100-sxm" and variant.hardware_confirmed is False
    assert CeilingInputs(bandwidth_gbs=4000).resolve("m").hardware_confirmed is None  # no hardware named


@pytest.mark.parametrize("nvml", [None, "NVIDIA H200"])
def test_the_report_says_whether_the_hardware_is_stated_or_the_gpus_own(start_sim, tmp_path, monkeypatch, nvml):
    """report.md's hardware row: "stated …, not confirmed" where nothing read the GPU's name
    (issue 52: a wrong --hardware without --gpu-metrics was unseen), the GPU's own where NVML
    named the same device."""
    gpu_flags: tuple[str, ...] = ()
    if nvml:
        monkeypatch.setitem(__import__("sys").modules, "pynvml", fake_pynvml(nvml))
        gpu_flags = ("--gpu-metrics", "nvml")
    sim, out = start_sim(), tmp_path / "out"
    proc = run_benchy_here(
        "run", "--base-url", sim.base_url, "--quiet", "--output", str(out), "--pp", "64", "--tg", "16",
        "--runs", "2", "--model-profile", "llama-3-8b", "--hardware", "h200", *gpu_flags,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    ceiling = json.loads((out / "results.json").read_text())["setup"]["ceiling"]
    assert ceiling["bandwidth_gbs"] == 4800 and ceiling["hardware_confirmed"] is bool(nvml)
    (row,) = [line for line in (out / "report.md").read_text().splitlines() if line.startswith("| Hardware profile")]
    if nvml:
        assert "the GPU's own name" in row and "not confirmed" not in row
    else:
        assert "h200 (stated by --hardware, not confirmed" in row
