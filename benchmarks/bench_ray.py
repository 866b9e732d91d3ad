"""`make bench-ray`: the aggregate tokens/s that 1, 2 and 4 Ray actors sustain, and each actor's
CPU per token, against servers that are never the bottleneck.

A benchmark, not a test. It starts K pump servers (bench_client.serve_pump: pre-rendered
streams, one token per SSE event, 8 events per write; SO_REUSEPORT on one port) pinned to
their own cores, then for each actor count N runs `benchy run --ray local
--ray-workers-per-node N` pinned to the client cores (the local Ray instance it starts, and so
its actors, inherit the pinning), with STREAMS_PER_ACTOR streams per actor and 256-token
outputs. Per N it prints:

  served tok/s     tokens the pumps wrote for this run ÷ (last token written − first request
                   arrived), by the pumps' own truth log: the client's pace, seen by the server
  × one actor      served tok/s ÷ the one-actor figure (the target: two actors ≥ 1.8× one,
                   on a machine with ≥ 4 cores for the clients)
  actor µs/token   each actor's CPU (its LoopMonitor, while its requests were in flight) ÷
                   the tokens it received
  busiest pump     the largest share of a core one pump used: near 100% the server, not
                   the client, set the pace (add --pumps)

`--repeat R` measures every N R times (interleaved) and keeps each N's best run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_client import PP, TG, Sims, _cores, _window, run_sampled  # noqa: E402

STREAMS_PER_ACTOR = 128
ROUNDS = 20  # requests per stream: a run of a few seconds, so start-up and tail are a small part
TARGET_SCALING = 1.8


@dataclass
class Run:
    actors: int
    served_tok_s: float
    actor_us_per_token: list[float]
    busiest_pump: float | None
    failed: int


def measure(pumps: Sims, actors: int, cores: set[int], rounds: int = ROUNDS) -> Run:
    streams = STREAMS_PER_ACTOR * actors
    cmd = [sys.executable, "-m", "benchy", "run", "--base-url", pumps.base_url, "--pp", str(PP), "--tg", str(TG)]
    cmd += ["-c", str(streams), "--runs", str(rounds), "--warmup", "0", "--quiet", "--format", "json"]
    cmd += ["--ray", "local", "--ray-workers-per-node", str(actors), "--no-server-metrics"]
    run = run_sampled(cmd, cores, [p.pid for p in pumps.procs])
    (case,) = json.loads(run.proc.stdout)["cases"]
    ids = {r["request_id"] for r in case["requests"]}
    mine = [t for t in pumps.truth() if t.get("request_id") in ids and t.get("last_token_event_s")]
    t0, t1 = _window(mine)
    served = sum(t["completion_tokens"] or 0 for t in mine) / (t1 - t0)
    per_token = [1e6 * w["cpu_s"] / w["tokens"] for w in case["client"]["per_worker"] if w["tokens"]]
    return Run(actors, served, per_token, run.busiest_server(t0, t1), case["n_failed"])


def report(best: dict[int, Run], client_cores: set[int]) -> list[str]:
    one = best.get(1)
    lines = [f"{'actors':>6} | {'served tok/s':>12} | {'× one':>5} | {'busiest pump':>12} | actor µs/token (each)"]
    for n, run in sorted(best.items()):
        ratio = f"{run.served_tok_s / one.served_tok_s:.2f}" if one else "–"
        busy = f"{run.busiest_pump:.0%}" if run.busiest_pump is not None else "–"
        each = ", ".join(f"{us:.1f}" for us in run.actor_us_per_token)
        failed = f" ({run.failed} failed)" if run.failed else ""
        lines.append(f"{n:>6} | {run.served_tok_s:>12,.0f} | {ratio:>5} | {busy:>12} | {each}{failed}")
    two = best.get(2)
    if one and two:
        ratio = two.served_tok_s / one.served_tok_s
        if len(client_cores) < 4:
            verdict = f"not judged: {len(client_cores)} client core(s); the target needs ≥ 4"
        else:
            verdict = "PASS" if ratio >= TARGET_SCALING else "FAIL"
        lines.append(f"{verdict}: two actors {ratio:.2f}× one (target ≥ {TARGET_SCALING}×)")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pumps", type=int, default=2, help="pump servers sharing the port (default 2)")
    ap.add_argument("--pump-cores", default="0", help="cores for the pumps, e.g. 0-5 (default 0)")
    ap.add_argument("--client-cores", default=None, help="cores for benchy and Ray (default: all the others)")
    ap.add_argument("--actors", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--repeat", type=int, default=1, help="runs of each actor count, interleaved; the best is kept")
    ap.add_argument("--rounds", type=int, default=ROUNDS, help=f"requests per stream (default {ROUNDS})")
    args = ap.parse_args(argv)
    pump_cores = _cores(args.pump_cores)
    all_cores = set(os.sched_getaffinity(0))
    client_cores = set(_cores(args.client_cores)) if args.client_cores else (all_cores - set(pump_cores)) or all_cores
    print(
        f"{args.pumps} pump(s) on core(s) {args.pump_cores}; benchy + Ray on core(s) "
        f"{','.join(map(str, sorted(client_cores)))}; pp{PP} tg{TG}, {STREAMS_PER_ACTOR} streams per actor, {args.rounds} requests each",
        flush=True,
    )
    best: dict[int, Run] = {}
    with tempfile.TemporaryDirectory(prefix="benchy-bench-ray-") as tmp:
        pumps = Sims(args.pumps, pump_cores, Path(tmp), kind="pump")
        try:
            for _ in range(args.repeat):
                for n in args.actors:
                    run = measure(pumps, n, client_cores, args.rounds)
                    print(f"  {n} actor(s): {run.served_tok_s:,.0f} tok/s", file=sys.stderr, flush=True)
                    if n not in best or run.served_tok_s > best[n].served_tok_s:
                        best[n] = run
        finally:
            pumps.stop()
    print("\n".join(report(best, client_cores)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
