"""`make bench-streams`: how close benchy's timestamps stay to the wire at thousands of streams.

A benchmark, not a test. K stream servers share one port (SO_REUSEPORT), each pinned to a core
of its own, and pace every stream at --tps tokens a second, one token an SSE event and one
event a write. They cannot be the bottleneck: one timer heap per process, pre-rendered events,
and each write time-stamped (perf_counter, the same CLOCK_MONOTONIC as benchy's workers on
this kernel) into a log line per request keyed by its X-Request-Id. `benchy run -c N` runs on
the other cores, --output kept, and each of its records is paired with the server's line:

  first-token lag   benchy's stamp of the first event − the server's write of it
  event lag         the same for every token event (event i of the record ↔ write i)
  send lag          the server's arrival of the request (the kernel's stamp of its bytes, so
                    not the server's own loop lag) − benchy's "sent" stamp
  client CPU        the CPU of benchy's process tree (sampled from /proc every 10 ms) over
                    the span the requests were in flight, in cores
  lost              requests asked for that did not come back whole (failed, or fewer events
                    than the server wrote)

and, per worker (BENCHY_WORKER_TRACE), the longest garbage-collector pause and the longest
hand-off of a batch of records to the parent: where a stall came from if there was one.

Targets (issue 40, on a 16-core host): p99 ≤ 2 ms and max ≤ 20 ms for every stamp at 4,000
streams, no request lost at 8,000.

    python benchmarks/bench_streams.py --streams 1000 2000 4000 8000      # the H200 host
    python benchmarks/bench_streams.py --streams 200 500 --tg 40          # a 2-core VM
"""

from __future__ import annotations

import argparse
import asyncio
import heapq
import json
import os
import resource
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_client import _chunk, _cores, _env, _free_port, _pin, _whole, run_sampled  # noqa: E402

SELF = Path(__file__).resolve()
TARGET_P99_MS, TARGET_MAX_MS, TARGET_AT = 2.0, 20.0, 4000
LOSSLESS_AT = 8000


# ---------------------------------------------------------------- the stream server


class _Stream:
    __slots__ = ("transport", "events", "i", "writes", "request_id", "arrival", "gap")

    def __init__(self, transport: asyncio.Transport, events: list[bytes], request_id: str, arrival: float, gap: float):
        self.transport, self.events, self.request_id, self.arrival, self.gap = (
            transport,
            events,
            request_id,
            arrival,
            gap,
        )
        self.i = 0
        self.writes: list[float] = []


def serve_streams(port: int, log_path: str, tps: float) -> None:
    """One server process: requests parsed by hand (HTTP/1.1 keep-alive), the first token
    written on arrival, each next one 1/tps later from a heap of due streams; the last write
    also carries the usage event, [DONE] and the chunked body's end."""
    from benchy.client import kernel_stamps
    from benchy.measure import tokenizer

    log = open(log_path, "a", encoding="utf-8", buffering=1 << 20)
    rendered: dict[int, list[bytes]] = {}
    due: list[tuple[float, int, _Stream]] = []
    seq = 0
    wake = asyncio.Event()
    gap = 1.0 / tps

    def events_of(n: int) -> list[bytes]:
        if n not in rendered:
            head = '{"id":"s","object":"chat.completion.chunk","created":1,"model":"benchy-sim","choices":'
            texts = [
                head + '[{"index":0,"delta":{"content":" w"},"logprobs":null,'
                f'"finish_reason":{"null" if i < n - 1 else chr(34) + "length" + chr(34)}}}]}}'
                for i in range(n)
            ]
            tail = head + f'[],"usage":{{"prompt_tokens":1,"completion_tokens":{n},"total_tokens":{n + 1}}}}}'
            chunks = [_chunk(f"data: {t}\n\n".encode()) for t in texts]
            chunks[-1] += _chunk(f"data: {tail}\n\n".encode()) + _chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n"
            rendered[n] = chunks
        return rendered[n]

    def write_next(stream: _Stream) -> bool:
        """Writes the stream's next event; False once it is done (or its connection gone)."""
        if stream.transport.is_closing():
            return False
        stream.writes.append(time.perf_counter())  # before the write: the bytes reach the client within it
        stream.transport.write(stream.events[stream.i])
        stream.i += 1
        if stream.i < len(stream.events):
            return True
        line = {"request_id": stream.request_id, "arrival_s": stream.arrival, "writes": stream.writes}
        log.write(json.dumps(line) + "\n")
        return False

    def begin(stream: _Stream) -> None:
        nonlocal seq
        if write_next(stream):
            seq += 1
            heapq.heappush(due, (stream.writes[-1] + stream.gap, seq, stream))
            wake.set()

    async def pace() -> None:
        nonlocal seq
        while True:
            if not due:
                log.flush()  # idle: every finished request is on disk for the reader
                wake.clear()
                await wake.wait()
                continue
            delay = due[0][0] - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            now = time.perf_counter()
            while due and due[0][0] <= now:
                when, _, stream = heapq.heappop(due)
                if write_next(stream):
                    seq += 1
                    heapq.heappush(due, (when + stream.gap, seq, stream))

    class Conn(asyncio.Protocol):
        """A request's arrival is the kernel's stamp of its bytes (kernel_stamps): this server's
        own loop lag is not benchy's send lag."""

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            self.transport = transport
            self.buf = b""
            self.view = memoryview(bytearray(65536))

        def get_buffer(self, sizehint: int) -> memoryview:
            return self.view

        def received_at(self, data: memoryview, arrival: float) -> None:
            self.data_received(bytes(data), arrival)

        def data_received(self, data: bytes, arrival: float | None = None) -> None:
            arrival = time.perf_counter() if arrival is None else arrival
            self.buf += data
            while True:
                end = self.buf.find(b"\r\n\r\n")
                if end < 0:
                    return
                lines = self.buf[:end].decode("latin-1").split("\r\n")
                headers = {k.strip().lower(): v.strip() for k, _, v in (x.partition(":") for x in lines[1:])}
                size = int(headers.get("content-length") or 0)
                if len(self.buf) < end + 4 + size:
                    return
                body, self.buf = self.buf[end + 4 : end + 4 + size], self.buf[end + 4 + size :]
                self.handle(lines[0], headers, body, arrival)

        def handle(self, first: str, headers: dict[str, str], body: bytes, arrival: float) -> None:
            if first.startswith("GET"):
                data = b'{"object":"list","data":[{"id":"benchy-sim","object":"model"}]}'
                self.transport.write(_whole(200 if "/models" in first else 404, data))
                return
            request = json.loads(body)
            n = int(request.get("max_tokens") or request.get("max_completion_tokens") or 16)
            if not request.get("stream"):
                messages = request.get("messages") or [{"content": str(request.get("prompt") or "")}]
                prompt = tokenizer.count(str(messages[0].get("content") or ""))
                answer = {
                    "choices": [
                        {"index": 0, "message": {"role": "assistant", "content": " w"}, "finish_reason": "length"}
                    ],
                    "usage": {"prompt_tokens": prompt, "completion_tokens": 1},
                }
                self.transport.write(_whole(200, json.dumps(answer).encode()))
                return
            self.transport.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
            )
            begin(_Stream(self.transport, events_of(n), headers.get("x-request-id", ""), arrival, gap))

    async def serve() -> None:
        loop = asyncio.get_running_loop()
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(("127.0.0.1", port))
        sock.listen(8192)
        sock.setblocking(False)
        conns = []

        def accept() -> None:
            while True:
                try:
                    conn, _ = sock.accept()
                except (BlockingIOError, InterruptedError):
                    return
                conn.setblocking(False)
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                kernel_stamps.ask_stamps(conn)
                conns.append(kernel_stamps.StampedTransport(loop, conn, Conn()))

        loop.add_reader(sock.fileno(), accept)
        stop = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        pacer = asyncio.ensure_future(pace())
        print("ready", flush=True)
        await stop.wait()
        loop.remove_reader(sock.fileno())
        for transport in conns:
            transport.close()
        sock.close()
        pacer.cancel()
        log.close()

    tokenizer.count("warm")
    from benchy.client import loop as event_loop

    event_loop.run(serve())


class Servers:
    """K stream servers on one port, server i pinned to cores[i % len(cores)]."""

    def __init__(self, k: int, cores: list[int], folder: Path, tps: float) -> None:
        self.port = _free_port()
        self.logs = [folder / f"writes-{self.port}-{i}.jsonl" for i in range(k)]
        self.procs: list[subprocess.Popen[str]] = []
        for i, log in enumerate(self.logs):
            cmd = [sys.executable, str(SELF), "--serve", str(self.port), str(log), str(tps)]
            proc = subprocess.Popen(
                cmd, stdout=subprocess.PIPE, text=True, env=_env(), preexec_fn=_pin({cores[i % len(cores)]})
            )
            self.procs.append(proc)
            if proc.stdout is None or proc.stdout.readline().strip() != "ready":
                self.stop()
                raise RuntimeError("a stream server did not start")
        self.base_url = f"http://127.0.0.1:{self.port}/v1"

    def writes(self, wanted: set[str]) -> dict[str, dict]:
        """The servers' lines, waiting up to a second for them to flush the ids wanted."""
        deadline = time.perf_counter() + 1.0
        while True:
            rows = self._read()
            if wanted <= rows.keys() or time.perf_counter() > deadline:
                return rows
            time.sleep(0.05)

    def _read(self) -> dict[str, dict]:
        rows: dict[str, dict] = {}
        for log in self.logs:
            if log.exists():
                for line in log.read_text().splitlines():
                    if line.strip():
                        row = json.loads(line)
                        rows[row["request_id"]] = row
        return rows

    def stop(self) -> None:
        for proc in self.procs:
            proc.terminate()
        for proc in self.procs:
            proc.wait(timeout=20)


# ---------------------------------------------------------------- one measurement


@dataclass
class Result:
    streams: int
    workers: int
    asked: int
    first_ms: list[float] = field(default_factory=list)
    event_ms: list[float] = field(default_factory=list)
    send_ms: list[float] = field(default_factory=list)
    lost: int = 0
    cores_busy: float | None = None
    events_s: float | None = None
    gc_ms: float | None = None  # the longest garbage-collector pause of any worker
    handoff_ms: float | None = None  # the longest hand-off of a batch to the parent
    stalls_ms: float | None = None  # benchy's own monitor: the loop's longest lag
    error: str = ""


def measure(servers: Servers, streams: int, args: argparse.Namespace, cores: set[int], folder: Path) -> Result:
    out = folder / f"run-{streams}"
    trace = folder / f"trace-{streams}.jsonl"
    cmd = [
        sys.executable, "-m", "benchy", "run", "--base-url", servers.base_url,
        "--pp", str(args.pp), "--tg", str(args.tg), "-c", str(streams), "--runs", str(args.rounds),
        "--warmup", "0", "--output", str(out), "--no-report", "--quiet", "--format", "json",
    ]  # fmt: skip
    if args.workers:
        cmd += ["--workers", str(args.workers)]
    os.environ["BENCHY_WORKER_TRACE"] = str(trace)
    try:
        run = run_sampled(cmd, cores, [p.pid for p in servers.procs])
    finally:
        del os.environ["BENCHY_WORKER_TRACE"]
    records = [json.loads(line) for line in (out / "requests.jsonl").read_text().splitlines()]
    records = [r for r in records if "token_event_s" in r and not r.get("warmup")]
    writes = servers.writes({r["request_id"] for r in records if r.get("status") == "ok"})
    (case,) = json.loads(run.proc.stdout)["cases"]
    client = case.get("client") or {}
    result = Result(streams, int(client.get("workers") or 1), streams * args.rounds)
    result.stalls_ms = client.get("loop_lag_ms_max")
    whole = 0
    spans: list[tuple[float, float]] = []
    events = 0
    for rec in records:
        server = writes.get(rec["request_id"])
        if rec.get("status") != "ok" or server is None:
            continue
        sent, stamps = rec["sent_mono_s"], rec["token_event_s"]
        if len(stamps) != len(server["writes"]):
            continue
        whole += 1
        lags = [1000 * (sent + s - w) for s, w in zip(stamps, server["writes"])]
        result.first_ms.append(lags[0])
        result.event_ms += lags
        result.send_ms.append(1000 * (server["arrival_s"] - sent))
        spans.append((sent, sent + (rec.get("end_s") or 0.0)))
        events += len(stamps)
    result.lost = result.asked - whole
    if spans:
        t0, t1 = min(s for s, _ in spans), max(e for _, e in spans)
        result.cores_busy = run.cpu_between(t0, t1) / (t1 - t0)
        result.events_s = events / (t1 - t0)
    if trace.exists():
        rows = [json.loads(line) for line in trace.read_text().splitlines() if line.strip()]
        result.gc_ms = max((r["gc_pause_ms_max"] for r in rows), default=None)
        result.handoff_ms = max((r["handoff_ms_max"] for r in rows), default=None)
    return result


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def table(results: list[Result]) -> str:
    from tabulate import tabulate

    def trio(values: list[float]) -> str:
        if not values:
            return "n/a"
        return f"{statistics.median(values):.3f} / {_pct(values, 0.99):.3f} / {max(values):.1f}"

    def num(value: float | None, fmt: str) -> str:
        return "n/a" if value is None else format(value, fmt)

    body = [
        [
            r.streams,
            r.workers,
            num(r.events_s, ",.0f"),
            trio(r.first_ms),
            trio(r.event_ms),
            trio(r.send_ms),
            num(r.cores_busy, ".2f"),
            f"{r.lost} of {r.asked}",
            num(r.stalls_ms, ".1f"),
            num(r.gc_ms, ".1f"),
            num(r.handoff_ms, ".1f"),
        ]
        for r in results
    ]
    headers = [
        "streams",
        "workers",
        "events/s",
        "first-token lag ms p50 / p99 / max",
        "event lag ms p50 / p99 / max",
        "send lag ms p50 / p99 / max",
        "client CPU (cores)",
        "lost",
        "loop lag max ms",
        "GC pause max ms",
        "hand-off max ms",
    ]
    return tabulate(body, headers=headers, tablefmt="pipe", disable_numparse=True)


def verdicts(results: list[Result]) -> list[str]:
    lines = []
    for r in results:
        if r.streams == TARGET_AT and r.event_ms:
            worst_p99 = max(_pct(v, 0.99) for v in (r.first_ms, r.event_ms, r.send_ms))
            worst_max = max(max(v) for v in (r.first_ms, r.event_ms, r.send_ms))
            ok = worst_p99 <= TARGET_P99_MS and worst_max <= TARGET_MAX_MS
            lines.append(
                f"{'PASS' if ok else 'FAIL'}: at {TARGET_AT:,} streams every stamp's p99 ≤ {TARGET_P99_MS:g} ms "
                f"and max ≤ {TARGET_MAX_MS:g} ms: worst p99 {worst_p99:.2f} ms, worst max {worst_max:.1f} ms"
            )
        if r.streams == LOSSLESS_AT:
            lines.append(f"{'PASS' if r.lost == 0 else 'FAIL'}: no request lost at {LOSSLESS_AT:,} streams: {r.lost}")
    return lines


def _raise_file_limit(streams: int) -> None:
    """Each stream is a socket at both ends: the soft limit up to the hard one."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = hard if hard == resource.RLIM_INFINITY else min(hard, max(soft, 2 * streams + 1024))
    if want > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    if resource.getrlimit(resource.RLIMIT_NOFILE)[0] < 2 * streams + 256:
        print(f"note: the open-file limit {hard} is low for {streams} streams", file=sys.stderr)


def _default_cores() -> tuple[list[int], list[int]]:
    """(client cores, server cores): half the machine each, one core left to this script and
    its sampler where there are 16 or more; on a small machine they share."""
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) >= 4:
        half = len(cores) // 2
        return cores[:half], cores[half : len(cores) - (1 if len(cores) >= 16 else 0)]
    return cores[-1:], cores[:1]


def _costs(args: argparse.Namespace, client_cores: list[int], server_cores: list[int]) -> int:
    from bench_client import Sims
    from bench_costs import measure_costs

    print(f"pump servers on core(s) {server_cores}; benchy (--workers 1) on core {client_cores[0]}", flush=True)
    with tempfile.TemporaryDirectory(prefix="benchy-costs-") as tmp:
        pumps = Sims(args.servers or len(server_cores), server_cores, Path(tmp), kind="pump")
        try:
            print("\n".join(measure_costs(pumps, {client_cores[0]}, Path(tmp), args.costs)))
        finally:
            pumps.stop()
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--serve", nargs=3, metavar=("PORT", "LOG", "TPS"), help=argparse.SUPPRESS)
    ap.add_argument("--streams", type=int, nargs="+", default=[1000, 2000, 4000, 8000])
    ap.add_argument("--tps", type=float, default=20.0, help="tokens a second per stream (default 20)")
    ap.add_argument("--tg", type=int, default=100, help="tokens per answer (default 100: 5 s at 20/s)")
    ap.add_argument("--pp", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=2, help="requests per stream (benchy --runs; default 2)")
    ap.add_argument("--servers", type=int, default=None, help="server processes (default: one per server core)")
    ap.add_argument("--client-cores", default=None, help="cores for benchy, e.g. 0-7 (default: half)")
    ap.add_argument("--server-cores", default=None, help="cores for the servers, e.g. 8-14 (default: the rest)")
    ap.add_argument("--workers", type=int, default=None, help="benchy --workers (default: benchy's choice)")
    ap.add_argument(
        "--costs",
        type=int,
        default=0,
        metavar="ROUNDS",
        help="instead: client CPU per request and per streamed token beside their floors, and one worker's "
        "requests/s, against pump servers, the median of ROUNDS alternating rounds (bench_costs.py)",
    )
    ap.add_argument("--keep", type=Path, default=None, help="keep the runs and server logs in this folder")
    args = ap.parse_args(argv)
    if args.serve:
        serve_streams(int(args.serve[0]), args.serve[1], float(args.serve[2]))
        return 0
    client_default, server_default = _default_cores()
    client_cores = _cores(args.client_cores) if args.client_cores else client_default
    server_cores = _cores(args.server_cores) if args.server_cores else server_default
    if args.costs:
        return _costs(args, client_cores, server_cores)
    _raise_file_limit(max(args.streams))
    k = args.servers or len(server_cores)
    print(
        f"{k} stream server(s) on core(s) {','.join(map(str, server_cores))}, {args.tps:g} tok/s a stream, "
        f"tg {args.tg}, {args.rounds} requests a stream; benchy on core(s) {','.join(map(str, client_cores))}",
        flush=True,
    )
    results = []
    with tempfile.TemporaryDirectory(prefix="benchy-streams-") as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        servers = Servers(k, server_cores, folder, args.tps)
        try:
            for streams in args.streams:
                started = time.perf_counter()
                try:
                    results.append(measure(servers, streams, args, set(client_cores), folder))
                    print(table(results[-1:]).splitlines()[-1], flush=True)  # in case a later count runs out of time
                except (RuntimeError, OSError, ValueError, KeyError) as exc:
                    print(f"{streams} streams: not measured: {exc}", file=sys.stderr)
                    continue
                print(
                    f"  {streams} streams measured in {time.perf_counter() - started:.0f} s",
                    file=sys.stderr,
                    flush=True,
                )
        finally:
            servers.stop()
    print()
    print(table(results))
    print()
    print("\n".join(verdicts(results)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
