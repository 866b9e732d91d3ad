"""`benchy selftest`: this host's client ceiling against a loopback stub, cached per host, saved in
every run's setup, and a case that drives over half of it flagged client_bound — the rate it
drove judged against the simulator's truth log."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from benchy.measure import selftest
from tests.conftest import client_slack_s, run_benchy, sim_env


def cache_env(root: Path) -> dict:
    return {**sim_env(), "XDG_CACHE_HOME": str(root)}


def run(sim, tmp_path, env: dict) -> tuple[dict, Path]:
    out = Path(tempfile.mkdtemp(dir=tmp_path))
    proc = run_benchy(
        "run", "--base-url", sim.base_url, "--quiet", "--output", str(out),
        "--pp", "64", "--tg", "4", "-c", "4", "--runs", "8", "--warmup", "0", env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return json.loads((out / "results.json").read_text()), out


def test_selftest_measures_and_caches_this_hosts_ceiling(tmp_path):
    proc = run_benchy("selftest", "--seconds", "0.3", "--streams", "8", env=cache_env(tmp_path))
    assert proc.returncode == 0, proc.stderr
    (cached,) = (tmp_path / "benchy" / "selftest").glob("*.json")
    found = json.loads(cached.read_text())
    assert found["requests_per_s"] > 0 and found["events_per_s"] > 0 and found["streams"] == 8
    # every event is received after the stub wrote it (one monotonic clock), the tail no earlier
    assert 0 <= found["stamp_lag_ms_p50"] <= found["stamp_lag_ms_p99"]
    assert f"{found['requests_per_s']:,.0f} requests/s" in proc.stdout
    assert run_benchy("selftest", "--seconds", "0", env=cache_env(tmp_path)).returncode == 2  # one line, no traceback


def test_a_case_past_half_the_ceiling_is_client_bound_with_the_rate_the_truth_shows(start_sim, tmp_path):
    sim = start_sim("--prefill-tps", "100000", "--decode-tps", "200")
    # A host whose selftest managed 4 requests/s and 40 events/s: any real case drives over half.
    slow = selftest.ClientCeiling(host="h", measured_utc="then", requests_per_s=4.0, events_per_s=40.0)
    path = tmp_path / "cache"
    env = cache_env(path)
    target = Path(env["XDG_CACHE_HOME"]) / "benchy" / "selftest"
    target.mkdir(parents=True)
    host = selftest.cache_path().name  # this host's file name, as the run will look it up
    (target / host).write_text(json.dumps(slow.to_dict()))
    results, out = run(sim, tmp_path, env)
    assert results["setup"]["client_ceiling"]["requests_per_s"] == 4.0
    (case,) = results["cases"]
    measured = {r["request_id"] for r in case["requests"] if not r["warmup"] and r["status"] == "ok"}
    truth = [t for t in sim.truth() if t["request_id"] in measured]
    served = max(max(e["t_s"] for e in t["events"]) for t in truth) - min(t["arrival_s"] for t in truth)
    (flag,) = [w for w in results["warnings"] if w["code"] == "client_bound" and w["case"] == case["label"]]
    (rate,) = [e for e in flag["evidence"] if e["name"] == "requests_per_s"]
    assert rate["threshold"] == 2.0 and len(truth) / served > 2.0
    # The rate benchy saw is the one served: its span is the server's, seen at most `slack` late
    # at either end.
    slack = client_slack_s(case)
    assert len(truth) / (served + 2 * slack) <= rate["observed"] <= len(truth) / max(served - 2 * slack, 1e-9)
    assert "client_bound" in (out / "report.md").read_text() and "4 requests/s" in (out / "report.md").read_text()


def test_a_run_without_a_selftest_has_no_ceiling_and_no_flag(start_sim, tmp_path):
    sim = start_sim("--instant")
    results, _ = run(sim, tmp_path, cache_env(tmp_path / "empty"))
    assert "client_ceiling" not in results["setup"]
    assert not [w for w in results["warnings"] if w["code"] == "client_bound"]
