"""probe.json is typed (results/probe.py) with a shipped JSON Schema, and a probe folder is a
bundle: `benchy rebuild DIR` remakes probe.json and its report from probe-manifest.json and
requests.jsonl alone, identical to the probe's own.

Against `benchy sim` over real HTTP.
"""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import jsonschema
import pytest

from benchy.probe import VERDICTS
from benchy.probe.bundle import PROBE_MANIFEST
from benchy.records import read_records
from benchy.results import probe as probe_file
from benchy.results.probe import ProbeResult
from tests.conftest import REPO_ROOT, run_benchy_here, start_benchy
from tests.test_interrupt import wait_for_lines

# probe.json files written before the classes existed (benchy probe-cache, n 3, one length; and --capacity)
BEFORE_TYPES = sorted((REPO_ROOT / "tests" / "data").glob("probe*-before-types.json"))
REMADE = ("probe.json", "probe.md")  # what a rebuild writes again (figures aside: PNG bytes)


def validator() -> jsonschema.protocols.Validator:
    schema = json.loads(probe_file.SCHEMA_FILE.read_text(encoding="utf-8"))
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def test_shipped_schema_is_generated_from_the_classes():
    shipped = json.loads(probe_file.SCHEMA_FILE.read_text(encoding="utf-8"))
    assert shipped == probe_file.json_schema(), "stale: run results.probe.write_schema()"


@pytest.mark.parametrize("path", BEFORE_TYPES, ids=lambda p: p.stem)
def test_a_probe_json_written_before_the_types_validates_and_reads_back_as_it_was(path):
    data = json.loads(path.read_text(encoding="utf-8"))
    validator().validate(data)
    read = probe_file.read(path)
    assert read.to_dict() == data  # key for key: the classes describe the old file
    assert ProbeResult.from_dict(data, strict=True) == read


def test_a_malformed_probe_json_is_one_line_exit_2_not_a_traceback(tmp_path):
    data = json.loads(BEFORE_TYPES[0].read_text(encoding="utf-8"))
    data["lengths"][0]["n_ok"] = "three"
    (tmp_path / "probe.json").write_text(json.dumps(data), encoding="utf-8")
    proc = run_benchy_here("report", str(tmp_path))
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert "n_ok" in proc.stderr and proc.stderr.strip().count("\n") == 0


def probe_into(sim, out: Path, *flags: str) -> dict:
    proc = run_benchy_here("probe-cache", "--base-url", sim.base_url, "-q", "-o", str(out), *flags)
    assert proc.returncode == 0, proc.stderr
    data = json.loads((out / "probe.json").read_text(encoding="utf-8"))
    validator().validate(data)
    return data


def rebuilt(out: Path) -> dict[str, bytes]:
    """What the probe wrote, then what `benchy rebuild` writes in its place from the bundle."""
    made = {name: (out / name).read_bytes() for name in REMADE}
    for name in REMADE:
        (out / name).unlink()
    proc = run_benchy_here("rebuild", str(out))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str(out / "probe.json")
    return made


PROBES = {
    "lengths": ("--lengths", "400", "900", "-n", "3", "--tg", "2"),
    "capacity": ("--capacity", "--capacity-prefix-tokens", "256", "--capacity-max-tokens", "2048", "--tg", "2"),
    "GPU and cache reset": ("--lengths", "300", "-n", "3", "--tg", "2", "--gpu-metrics", "{dcgm}", "--cache-reset"),
}  # fmt: skip


@pytest.mark.parametrize("flags", PROBES.values(), ids=PROBES.keys())
def test_rebuild_of_a_probe_folder_remakes_probe_json_and_its_report(start_sim, tmp_path, flags):
    sim = start_sim("--prefill-tps", "20000", "--decode-tps", "3000", "--cache-blocks", "40", "--gpus", "2")
    dcgm = sim.base_url.removesuffix("/v1") + "/dcgm/metrics"
    out = tmp_path / "probe"
    data = probe_into(sim, out, *(f.format(dcgm=dcgm) for f in flags))
    if "--gpu-metrics" in flags:  # the per-length figures a rebuild must make again from the window
        assert data["lengths"][0]["gpu"]["joules_per_request"] is not None
        assert data["setup"]["cache_reset"]["calls"] == 1
    # the bundle holds every request the server saw, and the manifest says the probe ended
    truth = {t["request_id"] for t in sim.truth() if "request_id" in t}  # besides requests: cache resets
    records = {r.request_id for r in read_records(out / "requests.jsonl")}
    assert records and records <= truth
    assert json.loads((out / PROBE_MANIFEST).read_text(encoding="utf-8"))["finished"] is True
    if data.get("capacity"):
        assert data["capacity"]["points"] and data["capacity"]["verdict"] in ("found", "beyond_max")
    else:
        asked = flags[flags.index("--lengths") + 1 : flags.index("-n")]
        assert [e["length"] for e in data["lengths"]] == [int(n) for n in asked]
    made = rebuilt(out)
    for name in REMADE:
        assert (out / name).read_bytes() == made[name], name
    # `benchy report DIR` of a probe folder that lost probe.json rebuilds it, as for a run
    (out / "probe.json").unlink()
    proc = run_benchy_here("report", str(out))
    assert proc.returncode == 0, proc.stderr
    assert (out / "probe.json").read_bytes() == made["probe.json"]
    assert (out / "probe.png" if data["lengths"] else out / "capacity.png").is_file()


def test_rebuild_of_a_probe_folder_without_its_records_is_one_line(start_sim, tmp_path):
    sim = start_sim("--instant")
    out = tmp_path / "probe"
    probe_into(sim, out, "--lengths", "200", "-n", "3", "--tg", "2")
    (out / "requests.jsonl").unlink()
    proc = run_benchy_here("rebuild", str(out))
    assert proc.returncode == 2 and "requests.jsonl" in proc.stderr and "Traceback" not in proc.stderr


def test_a_probe_killed_mid_length_is_rebuilt_from_its_bundle_and_names_the_cut(start_sim, tmp_path):
    """SIGKILL while the second length is under way: no probe.json was written, yet the bundle
    holds every request that finished; the rebuild judges those and names where the probe was cut."""
    sim = start_sim("--prefill-tps", "20000", "--decode-tps", "40")  # ~0.2 s a request: time to kill mid-length
    out = tmp_path / "probe"
    proc = start_benchy("probe-cache", "--base-url", sim.base_url, "-q", "-o", str(out),
                        *"--lengths 200 400 -n 3 --tg 8".split(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    records = out / "requests.jsonl"
    wait_for_lines(records, 8, proc)  # the first length's 6 and two of the second's
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    assert not (out / "probe.json").exists()
    rebuild = run_benchy_here("rebuild", str(out))
    assert rebuild.returncode == 0, rebuild.stderr
    probe = json.loads((out / "probe.json").read_text(encoding="utf-8"))
    validator().validate(probe)
    finished = list(read_records(records))
    assert probe["stopped"]["by"] == "killed" and "length 400" in probe["stopped"]["reason"]
    assert f"({len(finished) - 6} of its requests had finished)" in probe["stopped"]["reason"]
    first, cut = probe["lengths"]
    assert first["n_ok"] == 6 and first["verdict"] in VERDICTS
    assert cut["n_ok"] + cut["n_failed"] == len(finished) - 6
    truth = {t["request_id"] for t in sim.truth() if "request_id" in t}
    assert {r.request_id for r in finished} <= truth
    assert "Stopped early" in (out / "probe.md").read_text(encoding="utf-8")
