"""Where benchy's client CPU goes, a request and a token (issue 40): benchy under py-spy against
pump servers that are never the limit, its event loop's samples sorted into the steps a request
takes, as shares.

  python benchmarks/profile_client.py --py-spy PATH            # both kinds, 40,000 requests each
  python benchmarks/profile_client.py --py-spy PATH --raw DIR  # and keep py-spy's raw stacks

`nostream`: `--no-stream --pp 16 --tg 1 -c 64` (the per-request figure's run); `stream`:
`--pp 64 --tg 256 -c 64` (the per-token one's). benchy runs with --workers 1 on the first client
core, py-spy on other cores, the pumps on the server cores (bench_streams.py's split). Samples
outside the measured loop (start-up, calibration, the /tokenize choice, the analysis) are left
out, and py-spy leaves out idle ones: the shares are of the loop's busy time. py-spy pauses the
process to sample it, so the absolute rate is lower than without it; the shares hold.
"""

from __future__ import annotations

import argparse
import collections
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from bench_client import ROOT, Sims, _env, _pin
from bench_streams import _default_cores

KINDS = {
    "nostream": ["--no-stream", "--pp", "16", "--tg", "1"],
    "stream": ["--pp", "64", "--tg", "256"],
}

# (a frame a sample must hold, the step it is booked to), first match wins: a step's own
# frames before the frames of the callers they run under.
STEPS = (
    ("PromptFactory.build", "build: the prompt's text (nonce, words, its count)"),
    ("case_requests.<locals>.make", "build: the record, the plan, the template"),
    ("Ahead.", "build: the record, the plan, the template"),
    ("_Connection.begin", "send: transport.write (the loopback send runs the receiver's kernel side)"),
    ("StampedTransport.write", "send: transport.write (the loopback send runs the receiver's kernel side)"),
    ("StreamReader.close", "read: the whole answer's JSON and its booking"),
    ("StreamReader.feed", "read: the events (StreamReader.feed)"),
    ("_Connection.buffer_updated", "read: bytes in, stamped, the HTTP parse"),
    ("_Connection.received_at", "read: bytes in, stamped, the HTTP parse"),
    ("_read_ready", "read: bytes in, stamped, the HTTP parse"),
    ("record_line", "record: its requests.jsonl line (orjson)"),
    ("on_record", "record: written, tallied, released, failures counted"),
    ("Client.stream", "exchange: the client's and transport's Python (payload, headers, futures)"),
    ("LoopMonitor", "benchy's loop monitor"),
    ("Turns.", "turns: the loop's share of sends"),
    ("_closed.<locals>.stream", "the sender's loop"),
)


def step_of(frames: list[str]) -> str:
    for marker, step in STEPS:
        if any(marker in frame for frame in frames):
            return step
    return "uvloop's C (epoll, task steps)" if frames[-1].startswith("Runner.run") else "other"


def shares(raw: Path) -> tuple[int, list[tuple[str, float]]]:
    """(loop samples, [(step, share)] largest first) of py-spy's raw output."""
    counts: collections.Counter[str] = collections.Counter()
    for line in raw.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        frames = stack.split(";")
        runner = [i for i, frame in enumerate(frames) if frame.startswith("Runner.run")]
        if not runner or any(frame.startswith("_measure (benchy/run.py") for frame in frames):
            continue  # not the event loop, or the loop before and after the case's sends
        counts[step_of(frames[runner[-1] :])] += int(n)
    total = sum(counts.values())
    return total, [(step, n / total) for step, n in counts.most_common()] if total else []


def profile(py_spy: str, kind: str, requests: int, url: str, core: int, spare: set[int], raw: Path) -> None:
    """benchy on `core` (taskset), py-spy on the spare cores: its sampling is not benchy's CPU."""
    with tempfile.TemporaryDirectory(prefix="benchy-profile-") as tmp:
        benchy = ["taskset", "-c", str(core), sys.executable, "-m", "benchy", "run", "--base-url", url]
        benchy += [*KINDS[kind], "-c", "64", "--requests", str(requests), "--warmup", "0", "--workers", "1"]
        benchy += ["--transport", "lean", "--quiet", "--output", tmp, "--no-report"]
        cmd = [py_spy, "record", "-r", "1000", "-f", "raw", "-o", str(raw), "--", *benchy]
        pin = _pin(spare) if spare else None
        subprocess.run(cmd, check=True, env=_env(), cwd=ROOT, preexec_fn=pin, capture_output=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--py-spy", default="py-spy", help="the py-spy binary")
    parser.add_argument("--requests", type=int, default=40_000)
    parser.add_argument("--kinds", nargs="+", default=list(KINDS), choices=list(KINDS))
    parser.add_argument("--raw", type=Path, help="a folder to keep py-spy's raw stacks in")
    args = parser.parse_args()
    client, server = _default_cores()
    spare = set(os.sched_getaffinity(0)) - {client[0], *server}
    py_spy = str(Path(args.py_spy).resolve()) if os.sep in args.py_spy else args.py_spy  # benchy runs in ROOT
    with tempfile.TemporaryDirectory(prefix="benchy-pumps-") as tmp:
        folder = args.raw or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        pumps = Sims(max(1, len(server)), server, Path(tmp), 0.0, "pump")
        try:
            for kind in args.kinds:
                raw = folder / f"raw-{kind}.txt"
                profile(py_spy, kind, args.requests, pumps.base_url, client[0], spare, raw)
                total, rows = shares(raw)
                print(f"{kind}: {total} samples of the loop, {args.requests} requests (core {client[0]})")
                for step, share in rows:
                    print(f"  {100 * share:5.1f}%  {step}")
        finally:
            pumps.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
