"""benchmarks/bench_scale.py (`make bench-scale`) runs its way with every part skipped but the
start: the benchmark's own paths must not rot between the sittings that run it whole."""

from __future__ import annotations

from tests.conftest import REPO_ROOT, run_python


def test_bench_scale_with_the_runs_skipped_starts_a_simulator_and_ends_cleanly():
    done = run_python(str(REPO_ROOT / "benchmarks" / "bench_scale.py"), "--skip-long", "--skip-cpu", timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "benchy sim --preset instant at http://127.0.0.1:" in done.stdout
