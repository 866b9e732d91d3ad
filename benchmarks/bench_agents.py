"""`make bench-agents`: many concurrent agent sessions with think times from one benchy process
(issue 53): memory per idle session and send lag.

A benchmark, not a test. It writes an agent trace (the messages format, docs/agents.md) of S
sessions that start evenly over --ramp seconds, each --calls calls of small messages (--words a
message) with exponential think/tool gaps of mean --think seconds, and replays it with
`benchy run --trace` against `benchy sim --preset instant` (the server never the bottleneck).
Most sessions are idle at any moment, waiting out a gap, as agents waiting on tools are.

  memory per idle session   the benchy process's resident size (VmRSS), sampled every 0.1 s,
                            its median over the middle of the replay (all sessions started,
                            most idle), at two sizes S1 < S2: (RSS2 − RSS1) ÷ (S2 − S1);
                            target ≤ 20 KB a session
  send lag p99              each call's send behind its due time (results.json's send_lag: the
                            due time is its dependency's end plus its gap), at the larger size;
                            target ≤ 2 ms

On a 16-core host: `make bench-agents BENCH_AGENTS_ARGS="--sessions 1000 10000"`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

SELF = Path(__file__).resolve()
ROOT = SELF.parent.parent
sys.path.insert(0, str(SELF.parent))

from bench_scale import Sim, _env  # noqa: E402  (the instant simulator and the environment)

TARGET_KB_PER_SESSION = 20.0
TARGET_SEND_LAG_P99_MS = 2.0


def write_trace(
    path: Path, sessions: int, calls: int, think_s: float, ramp_s: float, words: int, seed: int = 53
) -> None:
    """S sessions of `calls` calls: system, task, then tool steps; starts spread over the ramp."""
    rng = np.random.default_rng(seed)
    lines = []
    for s in range(sessions):
        t = ramp_s * s / max(1, sessions)
        messages: list[dict] = [
            {
                "role": "system",
                "content": "You are an agent. " + " ".join(f"rule{k}" for k in range(words)),
                "timestamp": t,
            },
            {"role": "user", "content": f"task {s} " + " ".join(f"w{s}x{k}" for k in range(words)), "timestamp": t},
        ]
        for k in range(calls - 1):
            t += 0.01  # the answer, as the trace saw it
            call = {"id": f"c{s}_{k}", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
            messages.append({"role": "assistant", "content": f"step {k}", "tool_calls": [call], "timestamp": t})
            t += float(rng.exponential(think_s))
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": f"out {s} {k}", "timestamp": t})
        messages.append({"role": "assistant", "content": "done", "timestamp": t + 0.01})
        lines.append(json.dumps({"messages": messages}, separators=(",", ":")))
    path.write_text("\n".join(lines) + "\n")


def rss_kb(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def replay(url: str, trace: Path, out: Path, calls: int) -> tuple[float, dict, float]:
    """(median RSS KB over the replay's middle, the case's send_lag, wall s). The middle: while
    30-70% of the calls have been recorded (every session started, most waiting out a gap;
    before the results are built and the figures drawn)."""
    cmd = [sys.executable, "-m", "benchy", "run", "--base-url", url, "--trace", str(trace)]
    cmd += ["-o", str(out), "--force", "-q"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=_env())
    samples: list[tuple[float, int]] = []  # (share of the calls recorded, RSS KB)
    t0 = time.perf_counter()
    records = out / "requests.jsonl"

    def sample() -> None:
        seen, lines = 0, 0
        while proc.poll() is None:
            try:
                with records.open("rb") as fh:
                    fh.seek(seen)
                    chunk = fh.read()
                seen += len(chunk)
                lines += chunk.count(b"\n")
            except OSError:
                pass
            kb = rss_kb(proc.pid)
            if kb:
                samples.append((lines / calls, kb))
            time.sleep(0.1)

    watcher = threading.Thread(target=sample, daemon=True)
    watcher.start()
    _, err = proc.communicate()
    watcher.join()
    wall = time.perf_counter() - t0
    if proc.returncode not in (0, 1, 4):
        raise RuntimeError(f"benchy run exited {proc.returncode}: {err.decode(errors='replace')[-400:]}")
    [case] = json.loads((out / "results.json").read_text())["cases"]
    middle = [kb for share, kb in samples if 0.3 <= share <= 0.7]
    lag = {**case["send_lag"], "loop_lag_ms_max": (case.get("client") or {}).get("loop_lag_ms_max")}
    return float(statistics.median(middle or [kb for _, kb in samples])), lag, wall


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sessions", type=int, nargs=2, default=[500, 2000], metavar=("S1", "S2"))
    p.add_argument("--calls", type=int, default=4)
    p.add_argument("--think", type=float, default=4.0, help="mean think/tool gap, s")
    p.add_argument("--ramp", type=float, default=10.0, help="seconds over which the sessions start")
    p.add_argument("--words", type=int, default=40)
    args = p.parse_args(argv)
    print(
        f"{os.cpu_count()} CPUs; sessions {args.sessions}, {args.calls} calls each, think exp({args.think} s), ramp {args.ramp} s"
    )
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-agents-") as tmp, Sim() as sim:
        for n in args.sessions:
            trace = Path(tmp) / f"agents-{n}.jsonl"
            write_trace(trace, n, args.calls, args.think, args.ramp, args.words)
            kb, lag, wall = replay(sim.base_url, trace, Path(tmp) / f"out-{n}", n * args.calls)
            rows.append((n, kb, lag, wall))
            print(f"  {n:>6} sessions: RSS {kb / 1024:,.1f} MiB mid-replay; send lag p50 {lag['median'] * 1e3:.2f} ms, "
                  f"p99 {lag['p99'] * 1e3:.2f} ms, max {lag['max'] * 1e3:.2f} ms (event loop stalls up to "
                  f"{lag['loop_lag_ms_max'] or 0:.0f} ms); {wall:.1f} s")  # fmt: skip
    (n1, kb1, _, _), (n2, kb2, lag2, _) = rows
    per = (kb2 - kb1) / (n2 - n1)
    p99_ms = lag2["p99"] * 1e3
    print(
        f"memory per idle session: {per:.1f} KB (target ≤ {TARGET_KB_PER_SESSION:g}): {'met' if per <= TARGET_KB_PER_SESSION else 'NOT met'}"
    )
    print(f"send lag p99 at {n2} sessions: {p99_ms:.2f} ms (target ≤ {TARGET_SEND_LAG_P99_MS:g}): "
          f"{'met' if p99_ms <= TARGET_SEND_LAG_P99_MS else 'NOT met'}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
