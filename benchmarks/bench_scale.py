"""`make bench`: how benchy scales with a run's length, and what a run costs beside llama-benchy.

A benchmark, not a test (issue 26): it starts `benchy sim --preset instant` (no sleeps: the
server is never the bottleneck) and measures, each the median of --repeat runs (the machine may
be shared and noisy; every run is printed):

  peak RSS        of `benchy run --pp 64 --tg 8 -c 32 --requests N` at N = 2,000 and 20,000
                  (os.wait4's ru_maxrss of that process: its largest resident size), and the
                  ratio 20k ÷ 2k; target at most 1.5 (memory flat in the number of requests)
  report CPU      user + system seconds of `benchy report` on each of those saved runs, and the
                  ratio; target at most 2 (figures from summaries, not re-read records)
  512x256 run     CPU-seconds (user + system, the process and the workers it waited for) of a
                  512-request, 256-stream run (pp 64, tg 256) beside llama-benchy's for the same
                  requests (--runs 2 --concurrency 256), when --llama-benchy or $LLAMA_BENCHY
                  names it; target: benchy's at most llama-benchy's. llama-benchy loads the
                  model's tokenizer to cut its prompts, benchy o200k to count: llama-benchy is
                  given o200k as a tokenizer.json (hf_vocab.py, as gpt-oss's), and the figure
                  with a 2,000-word toy tokenizer is printed beside it. benchy is measured twice:
                  with --output (results.json, requests.jsonl, report.md and its PNG figures
                  drawn) and without (the table printed, no file written: what llama-benchy
                  does by default; it draws no figure and saves nothing unless --save-result)

  soak            --soak N (not for CI: minutes): the same load at N requests (200,000), once:
                  its peak RSS against the 2,000-request run's (target at most 1.5), its CPU,
                  results.json's size, and `benchy report` on it
  end phase       of each long run and the soak: seconds from its last record (requests.jsonl's
                  last write: the writer closes it as the load ends) to the process's exit (the
                  results built, checked, saved, the report drawn); the soak's target: 30 s

The client's cost per streamed token, against llama-benchy's, is benchmarks/bench_client.py's
(`make bench` runs it after this one): CPU between the first request's arrival and the last
token written, by the simulator's truth log.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

SELF = Path(__file__).resolve()
ROOT = SELF.parent.parent
sys.path.insert(0, str(SELF.parent))  # bench_client's llama-benchy helpers

TARGET_RSS_RATIO = 1.5
TARGET_REPORT_RATIO = 2.0
TARGET_CPU_RATIO = 1.0
TARGET_SOAK_END_S = 30.0  # the soak's last record → exit
SHORT, LONG = 2_000, 20_000


@dataclass
class Usage:
    """What one finished process used: its peak resident size and CPU seconds."""

    rss_mb: float
    cpu_s: float
    wall_s: float
    exited_at: float  # time.time() once it had exited


def end_phase_s(run: Usage, out: Path) -> float:
    """Seconds from the run's last record written (requests.jsonl's mtime) to its exit."""
    return run.exited_at - (out / "requests.jsonl").stat().st_mtime


def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def measure(cmd: list[str]) -> Usage:
    """Runs `cmd` to its end; raises when it fails."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=_env())
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if proc.returncode not in (0, 4):  # 4: finished with warnings (docs/exit-codes.md)
        raise RuntimeError(f"{shlex.join(cmd[:4])} … exited {proc.returncode}: {err.strip()[-400:]}")
    return Usage(usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime, time.perf_counter() - t0, time.time())


class Sim:
    """`benchy sim --preset instant` on a free port, for the length of a `with`."""

    def __enter__(self) -> Sim:
        cmd = [sys.executable, "-m", "benchy", "sim", "--preset", "instant", "--port", "0"]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=_env())
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if "listening on" in line:
                self.base_url = line.split("listening on", 1)[1].strip() + "/v1"
                return self
        raise RuntimeError("benchy sim did not start")

    def __exit__(self, *exc) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


def benchy_run(url: str, out: Path | None, load: list[str]) -> list[str]:
    """`benchy run`; out None: no --output (nothing saved, no report drawn)."""
    files = ["--output", str(out), "--force"] if out is not None else []
    return [sys.executable, "-m", "benchy", "run", "--base-url", url, *load, *files, "--quiet"]


def long_run_figures(sim: Sim, folder: Path, repeat: int) -> dict[int, list[tuple[Usage, Usage]]]:
    """(run, report) usage per request count, `repeat` times, the counts alternating."""
    found: dict[int, list[tuple[Usage, Usage]]] = {SHORT: [], LONG: []}
    for i in range(repeat):
        for n in (SHORT, LONG):
            out = folder / f"run{n}"
            load = ["--pp", "64", "--tg", "8", "-c", "32", "--requests", str(n)]
            run = measure(benchy_run(sim.base_url, out, load))
            report = measure([sys.executable, "-m", "benchy", "report", str(out), "--force"])
            found[n].append((run, report))
            print(
                f"  round {i + 1}: {n:>6,} requests: run peak RSS {run.rss_mb:6.0f} MB, report {report.cpu_s:5.2f} CPU-s, "
                f"end phase {end_phase_s(run, out):5.2f} s"
            )
    return found


@dataclass
class Soak:
    run: Usage
    report: Usage
    size_mb: float  # results.json's
    end_phase_s: float  # last record → exit


def soak_figures(sim: Sim, folder: Path, n: int, keep: bool = False) -> Soak:
    """One run of `n` requests: the long-run load, soaked."""
    out = folder / f"soak{n}"
    load = ["--pp", "64", "--tg", "8", "-c", "32", "--requests", str(n)]
    run = measure(benchy_run(sim.base_url, out, load))
    end = end_phase_s(run, out)
    size_mb = (out / "results.json").stat().st_size / 1e6
    report = measure([sys.executable, "-m", "benchy", "report", str(out), "--force"])
    print(
        f"  soak: {n:>,} requests: run peak RSS {run.rss_mb:6.0f} MB, {run.cpu_s:.0f} CPU-s, {run.wall_s:.0f} s "
        f"(end phase {end:.1f} s); results.json {size_mb:.0f} MB; report peak RSS {report.rss_mb:.0f} MB, "
        f"{report.cpu_s:.1f} CPU-s"
    )
    if not keep:
        shutil.rmtree(out, ignore_errors=True)  # hundreds of MB
    return Soak(run, report, size_mb, end)


@dataclass
class CpuRuns:
    """CPU-seconds of each round of the 512-request, 256-stream run."""

    drawn: list[float] = field(default_factory=list)  # benchy run --output: files written, report drawn
    table: list[float] = field(default_factory=list)  # benchy run without --output: the table only
    # llama-benchy with a model's tokenizer (o200k's, as benchy's; empty when not given)
    theirs: list[float] = field(default_factory=list)
    theirs_toy: list[float] = field(default_factory=list)  # with a 2,000-word toy tokenizer (what no model loads)


def cpu_run_figures(sim: Sim, folder: Path, repeat: int, llama_benchy: str | None) -> CpuRuns:
    """CPU-seconds of the 512-request, 256-stream run: benchy's both ways and llama-benchy's, alternating."""
    runs = CpuRuns()
    book = toy = None
    if llama_benchy:
        from bench_client import llama_benchy_files, toy_tokenizer

        book = llama_benchy_files(folder, real_vocabulary=True)
        toy = toy_tokenizer(folder)
    load = ["--pp", "64", "--tg", "256", "-c", "256", "--requests", "512"]
    for i in range(repeat):
        runs.drawn.append(measure(benchy_run(sim.base_url, folder / "run512", load)).cpu_s)
        runs.table.append(measure(benchy_run(sim.base_url, None, load)).cpu_s)
        line = f"  round {i + 1}: 512x256: benchy {runs.drawn[-1]:5.2f} CPU-s (report drawn), {runs.table[-1]:5.2f} (table only)"
        if llama_benchy and book is not None and toy is not None:
            runs.theirs.append(measure(llama_benchy_cmd(llama_benchy, sim.base_url, book[0], book[1])).cpu_s)
            runs.theirs_toy.append(measure(llama_benchy_cmd(llama_benchy, sim.base_url, toy, book[1])).cpu_s)
            line += f", llama-benchy {runs.theirs[-1]:5.2f} CPU-s ({runs.theirs_toy[-1]:5.2f} with a toy tokenizer)"
        print(line)
    if book is not None:
        book[2].shutdown()
    return runs


def llama_benchy_cmd(exe: str, url: str, tokenizer: Path, book: str) -> list[str]:
    return [
        *shlex.split(exe),
        *("--base-url", url, "--model", "benchy-sim", "--tokenizer", str(tokenizer), "--book-url", book),
        *("--pp", "64", "--tg", "256", "--exact-tg", "--runs", "2", "--concurrency", "256"),
        *("--no-warmup", "--skip-coherence", "--latency-mode", "none"),
    ]


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def summary(long: dict[int, list[tuple[Usage, Usage]]], runs: CpuRuns) -> list[str]:
    lines = _long_lines(long) if long else []
    if not runs.drawn:
        return lines
    for name, ours in (("report drawn", runs.drawn), ("table only", runs.table)):
        mine = statistics.median(ours)
        line = f"512-request 256-stream run ({name}): benchy {mine:.2f} CPU-s"
        if runs.theirs:
            other = statistics.median(runs.theirs)
            ratio = mine / other
            line += (
                f", llama-benchy {other:.2f} CPU-s: ratio {ratio:.2f} (target <= {TARGET_CPU_RATIO})"
                f"  {_verdict(ratio <= TARGET_CPU_RATIO)}"
            )
        else:
            line += " (no llama-benchy given: --llama-benchy)"
        lines.append(line)
    if runs.theirs_toy:
        toy = statistics.median(runs.theirs_toy)
        lines.append(
            f"  llama-benchy with a 2,000-word toy tokenizer instead of o200k's: {toy:.2f} CPU-s (table only: "
            f"ratio {statistics.median(runs.table) / toy:.2f}); a model's tokenizer costs it "
            f"{statistics.median(runs.theirs) - toy:+.2f} CPU-s, as o200k costs benchy"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs of each figure; the median is reported")
    parser.add_argument(
        "--llama-benchy",
        default=os.environ.get("LLAMA_BENCHY"),
        help="llama-benchy command, e.g. /tmp/lbvenv/bin/llama-benchy ($LLAMA_BENCHY)",
    )
    parser.add_argument("--skip-long", action="store_true", help="only the 512x256 run")
    parser.add_argument("--skip-cpu", action="store_true", help="no 512x256 run")
    parser.add_argument(
        "--keep", type=Path, metavar="DIR", help="save the runs in DIR and keep them (re-render them later)"
    )
    parser.add_argument("--soak", type=int, metavar="N", help="also a run of N requests (200000), once: not for CI")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp, Sim() as sim:
        folder = args.keep or Path(tmp)
        print(f"benchy sim --preset instant at {sim.base_url}; {os.cpu_count()} CPUs; medians of {args.repeat}")
        long = {} if args.skip_long else long_run_figures(sim, folder, args.repeat)
        soak = soak_figures(sim, folder, args.soak, args.keep is not None) if args.soak else None
        runs = CpuRuns() if args.skip_cpu else cpu_run_figures(sim, folder, args.repeat, args.llama_benchy)
    lines = summary(long, runs)
    if soak is not None:
        lines += _soak_lines(args.soak, soak, long)
    print("\n".join(lines))
    return 0


def _soak_lines(n: int, soak: Soak, long: dict[int, list[tuple[Usage, Usage]]]) -> list[str]:
    run, report, size_mb = soak.run, soak.report, soak.size_mb
    line = f"soak of {n:,} requests: run peak RSS {run.rss_mb:.0f} MB, report peak RSS {report.rss_mb:.0f} MB"
    if long:
        short = statistics.median(r.rss_mb for r, _ in long[SHORT])
        ratio = run.rss_mb / short
        line += f"; ÷ 2,000's {ratio:.2f} (target <= {TARGET_RSS_RATIO})  {_verdict(ratio <= TARGET_RSS_RATIO)}"
    end = soak.end_phase_s
    return [
        line,
        f"  end phase (last record -> exit) {end:.1f} s (target <= {TARGET_SOAK_END_S:g})  "
        f"{_verdict(end <= TARGET_SOAK_END_S)}",
        f"  run {run.cpu_s:.0f} CPU-s, report {report.cpu_s:.1f} CPU-s, results.json {size_mb:.0f} MB",
    ]


def _long_lines(long: dict[int, list[tuple[Usage, Usage]]]) -> list[str]:
    rss = {n: statistics.median(r.rss_mb for r, _ in runs) for n, runs in long.items()}
    report = {n: statistics.median(p.cpu_s for _, p in runs) for n, runs in long.items()}
    rss_ratio, report_ratio = rss[LONG] / rss[SHORT], report[LONG] / report[SHORT]
    return [
        f"{'figure':<34}{'2,000':>12}{'20,000':>12}{'ratio':>9}{'target':>9}",
        f"{'peak RSS of benchy run, MB':<34}{rss[SHORT]:>12.0f}{rss[LONG]:>12.0f}{rss_ratio:>9.2f}"
        f"{'<= ' + str(TARGET_RSS_RATIO):>9}  {_verdict(rss_ratio <= TARGET_RSS_RATIO)}",
        f"{'benchy report, CPU-s':<34}{report[SHORT]:>12.2f}{report[LONG]:>12.2f}{report_ratio:>9.2f}"
        f"{'<= ' + str(TARGET_REPORT_RATIO):>9}  {_verdict(report_ratio <= TARGET_REPORT_RATIO)}",
    ]


if __name__ == "__main__":
    sys.exit(main())
