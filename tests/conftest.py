"""Shared fixtures: `start_sim` launches `benchy sim` processes whose truth log tests read, and
`run_benchy` / `start_benchy` a benchy of its own (both forked from a warm process:
tests/forkserver.py), or `run_benchy_here` benchy in the test process."""

from __future__ import annotations

import ast
import compileall
import contextlib
import io
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from benchy.records import RequestRecord  # noqa: E402
from benchy.records.plan import RequestTags, Tagged  # noqa: E402
from benchy.sim import stalls  # noqa: E402
from benchy.sim.process import SimProcess, child_env  # noqa: E402  (after the path is set)
from tests.forkserver import ForkedPopen, ForkedSim, run_forked  # noqa: E402

# CPython 3.11 keeps the AST constructor's recursion depth in interpreter-wide state: two threads
# in ast.parse at once (pytest drawing a failure's source, a server thread's traceback drawing its
# carets) can raise "SystemError: AST constructor recursion depth mismatch", which turned one
# failing test into an INTERNALERROR that ended a whole CI run (python/cpython#106905). In the
# test process, one parse at a time.
_AST_LOCK = threading.RLock()
_ast_parse = ast.parse


def _parse_one_at_a_time(*args, **kwargs):
    with _AST_LOCK:
        return _ast_parse(*args, **kwargs)


ast.parse = _parse_one_at_a_time  # type: ignore[assignment]

# benchy takes a proxy from HTTP_PROXY / HTTPS_PROXY: the suite's servers are all on loopback,
# and a developer's proxy must not stand between them and benchy (test_transport sets its own).
for _var in ("NO_PROXY", "no_proxy"):
    os.environ[_var] = ",".join(filter(None, [os.environ.get(_var), "127.0.0.1", "localhost", "::1", "[::1]"]))

# A suite started in the background (`make test &` in a script) inherits Ctrl-C ignored, and
# so would every benchy it starts: the tests that interrupt one would find it deaf.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# Warnings about the machine the test runs on, not about the server or benchy's figures: a busy
# (CI) machine legitimately adds them to any run (benchy's own loop falling behind; TTFT time
# spent outside the server, which on a busy machine is the client waiting for a core). A test
# about something else ignores them; a test about one of them asks for it by name.
ENVIRONMENT_WARNINGS = frozenset({"client_overloaded", "ttft_outside_server", "client_bound"})


def without_environment_warnings(results: dict) -> dict:
    """The results as a quiet machine would have them: environment warnings dropped."""
    return {**results, "warnings": [w for w in results["warnings"] if w["code"] not in ENVIRONMENT_WARNINGS]}


def warning_codes(results: dict, case: str | None = None, truth: dict[str, dict] | None = None) -> set[str]:
    """The codes of the run's warnings (of one case, if given), environment warnings left out.
    With the simulator's truth (by request id), a warning that a busy machine makes true of the
    simulator itself is left out too where the truth shows it: a drift (rate_drift, rate_drift_
    across_cases: the simulator slowed steadily) or sse_buffering (it fell so far behind that it
    wrote the tokens in bursts) or prefill_holds_queueing (its requests waited or were prefilled
    together). Where the truth shows none, the warning stays."""
    warnings = without_environment_warnings(results)["warnings"]
    if truth is not None:
        warnings = [
            w
            for w in warnings
            if not (
                _drift_the_truth_shows(results, w, truth)
                or _bursts(results, w, truth)
                or _shared_prefill(results, w, truth)
            )
        ]
    return {w["code"] for w in warnings if case is None or w["case"] == case}


def wrote_in_bursts(truth: dict) -> bool:
    """The simulator fell so far behind its own schedule (a busy machine) that it wrote the
    request's tokens in bursts: the median gap between its writes under half the planned one.
    On the wire such a stream is buffered, and benchy rightly withholds its stream timing."""
    made, due = truth.get("token_times_s") or [], truth.get("token_due_s") or []
    if len(made) < 3 or len(due) < 3:
        return False
    return statistics.median(b - a for a, b in zip(made, made[1:])) < 0.5 * statistics.median(
        b - a for a, b in zip(due, due[1:])
    )


def _bursts(results: dict, warning: dict, truth: dict[str, dict]) -> bool:
    """An sse_buffering warning whose case the simulator wrote in bursts, most of its requests
    (benchy calls a case buffered when at least half its requests are)."""
    if warning["code"] != "sse_buffering":
        return False
    requests = [
        truth[r["request_id"]]
        for c in results["cases"]
        if c["label"] == warning["case"]
        for r in c["requests"]
        if not r["warmup"] and r["request_id"] in truth
    ]
    return bool(requests) and sum(map(wrote_in_bursts, requests)) >= len(requests) / 2


DRIFT_CODES = ("rate_drift", "rate_drift_across_cases")


def _shared_prefill(results: dict, warning: dict, truth: dict[str, dict]) -> bool:
    """A prefill_holds_queueing warning whose case's requests, in the truth, waited for a slot or
    were prefilled at the same time as another (on a busy machine the simulator's prefills of
    concurrent requests overlap longer): their TTFT did hold more than their own prefill."""
    if warning["code"] != "prefill_holds_queueing" or warning["case"] is None:
        return False
    [case] = [c for c in results["cases"] if c["label"] == warning["case"]]
    served = [truth.get(r["request_id"]) for r in case["requests"] if not r["warmup"]]
    served = [t for t in served if t is not None and t.get("prefill_start_s") is not None]
    if any((t.get("admitted_s") or 0.0) - (t.get("queued_s") or 0.0) > 0.001 for t in served):
        return True
    spans = sorted((t["prefill_start_s"], t["prefill_end_s"]) for t in served)
    return any(later[0] < earlier[1] for earlier, later in zip(spans, spans[1:]))


def _drift_the_truth_shows(results: dict, warning: dict, truth: dict[str, dict]) -> bool:
    """Whether a drift warning's rates drift in the truth too: the same trend test rate_drift
    makes (results/drift.py), on each request's rates as the simulator wrote its tokens."""
    if warning["code"] not in DRIFT_CODES:
        return False
    from benchy.results import drift

    if warning["code"] == "rate_drift":
        cases = [c for c in results["cases"] if c["label"] == warning["case"]]
    else:  # pooled over the cases that share the drift
        across = {w["case"] for w in results["warnings"] if w["code"] == warning["code"]}
        cases = [c for c in results["cases"] if c["label"] in across]
    requests = [r for c in cases for r in c["requests"] if not r["warmup"] and r["request_id"] in truth]
    for metric in drift.DRIFT_METRICS:
        points = [(r["sent_mono_s"], rate) for r in requests if (rate := _truth_rate(truth[r["request_id"]], metric))]
        found = drift._trend(points, metric)
        if found is not None and found.found:
            return True
    return False


def _truth_rate(t: dict, metric: str) -> float | None:
    """A request's decode or end-to-end rate (tokens/s) as the simulator wrote its tokens."""
    times = t.get("token_times_s") or []
    if metric == "decode_tps":
        return (len(times) - 1) / (times[-1] - times[0]) if len(times) > 1 and times[-1] > times[0] else None
    return len(times) / (times[-1] - t["arrival_s"]) if times and times[-1] > t["arrival_s"] else None


def bare_record() -> RequestRecord:
    """An empty record of one request, for a reader test to fill (nothing planned but one token)."""
    return RequestRecord(
        case="c",
        run=0,
        index=0,
        warmup=False,
        request_id="r",
        nonce=None,
        target_prompt_tokens=1,
        target_output_tokens=1,
    )


def bare_row() -> Tagged:
    """bare_record joined with a plan's tags (none set): what the analysis reads, for a test of
    a figure to fill (the tags: records/plan.py)."""
    return Tagged.joined(bare_record(), RequestTags())


def records_in(log: bytes) -> int:
    """The records a requests.jsonl's bytes hold so far: its lines less its header and each
    request's plan line (requests 2.0: written as the request is sent, before its record)."""
    return log.count(b"\n") - log.startswith(b'{"schema"') - log.count(b'{"plan_of"')


def loop_lag_s(case: dict) -> float:
    """The longest benchy's own event loop was seen to stall while the case's requests were in
    flight (monitor.py): how much later than the wire a busy machine may have stamped an event."""
    return ((case.get("client") or {}).get("loop_lag_ms_max") or 0.0) / 1000


def client_slack_s(case: dict) -> float:
    """How late benchy may have stamped an event of this case, measured rather than assumed:
    a few ms of the machine's scheduling, plus the longest its own event loop was seen to
    stall while the case's requests were in flight (monitor.py, in the case's results)."""
    return 0.010 + loop_lag_s(case)


def sim_lag_s(truth: dict) -> float:
    """How far the simulator's own loop fell behind while it held this request or left it unread
    (its truth record, sim/stalls.py): how late a busy machine may have made the record's stamps,
    the arrival's included. Measured by the simulator's timer, never fitted from the times
    checked; the timer sees a stall up to one of its intervals short."""
    return (truth.get("loop_behind_s") or 0.0) + stalls.INTERVAL_S


def truth_slack_s(case: dict, truth: dict) -> float:
    """How far a figure of benchy's may lie from the truth log's for one request: benchy's
    stamps late by its measured slack, the simulator's by its own measured stall."""
    return client_slack_s(case) + sim_lag_s(truth)


def sim_env() -> dict:
    """The environment for a child `python -m benchy` that must import this checkout."""
    return child_env()


BENCHY = (sys.executable, "-m", "benchy")  # the command line of a child benchy


def run_benchy(*args: str, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """`python -m benchy ARGS` from the repo root, output captured as text: a process of its own
    (its signals, environment, exit status), forked from a warm one (tests/forkserver.py)."""
    return run_forked(list(args), env=env or sim_env(), timeout=timeout)


def run_python(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """`python ARGS` (a benchmark script, a `-c` program) from the repo root, this checkout
    importable, output captured as text: a fresh interpreter, not a fork."""
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, env=sim_env(), cwd=REPO_ROOT, timeout=timeout
    )


def start_benchy(*args: str, **popen) -> ForkedPopen:
    """subprocess.Popen(python -m benchy ARGS, **popen) from the repo root (stdin, stdout,
    stderr, text, env as Popen takes them; env defaults to sim_env()), forked from a warm process."""
    return ForkedPopen(list(args), **{"env": sim_env(), **popen})


def worker_pids(pid: int) -> list[int]:
    """The worker processes of the benchy process `pid`: the children of its fork server
    (load/workers.py forks every worker from one), or children it spawned itself."""
    found: list[int] = []
    for kid in _child_pids(pid):
        line = cmdline(kid)
        if b"multiprocessing.forkserver" in line:
            found += _child_pids(kid)
        elif b"spawn_main" in line:
            found.append(kid)
    return found


def _child_pids(pid: int) -> list[int]:
    kids: list[int] = []
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            kids += [int(k) for k in (task / "children").read_text().split()]
    except OSError:  # gone meanwhile
        pass
    return kids


def cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def run_benchy_here(*args: str) -> subprocess.CompletedProcess:
    """What run_benchy gives, through the same entry point (cli.main) but in this process: no
    interpreter start-up, and the imports and vocabulary a child loads again every time (the
    tokenizer, matplotlib) are loaded once per test process. For every test that needs no
    process of its own (a signal, an environment, a kill)."""
    out, err = io.StringIO(), io.StringIO()
    here = os.getcwd()
    os.chdir(REPO_ROOT)  # as run_benchy's child: relative paths mean the same
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            from benchy import cli

            cli.main(list(args))
        code = 0
    except SystemExit as exited:
        code = exited.code if isinstance(exited.code, int) else (0 if exited.code is None else 1)
    finally:
        os.chdir(here)
    return subprocess.CompletedProcess([*BENCHY, *args], code, out.getvalue(), err.getvalue())


def run_json(sim, tmp_path, *args: str) -> dict:
    """`benchy run ARGS` against `sim` in this process, into a fresh folder under tmp_path
    (-o refuses one in use); its results.json, once it exited 0."""
    out = Path(tempfile.mkdtemp(dir=tmp_path))
    proc = run_benchy_here("run", "--base-url", sim.base_url, "-q", "--no-report", "-o", str(out), *args)
    assert proc.returncode == 0, proc.stderr
    return json.loads((out / "results.json").read_text())


def post_chat(base_url: str, body: dict, timeout: float = 60) -> tuple[int, dict]:
    """POST a chat body to BASE_URL/chat/completions: (HTTP status, its JSON; {} for an error
    body that is not JSON)."""
    request = urllib.request.Request(
        base_url + "/chat/completions", json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        try:
            return exc.code, json.loads(exc.read())
        except ValueError:
            return exc.code, {}


@pytest.fixture
def start_sim(tmp_path):
    """start_sim(*flags, truth_log=True) -> SimProcess (`.base_url`, `.truth()`, `.stderr()`,
    `.proc`); every sim is stopped at teardown, also when the test fails. Each is a process of
    its own, forked from a warm one (tests/forkserver.py: no interpreter start-up per simulator)."""
    started: list[SimProcess] = []

    def start(*flags: str, truth_log: bool = True) -> SimProcess:
        truth_path = tmp_path / f"truth-{len(started)}.jsonl" if truth_log else None
        sim = ForkedSim(*flags, truth_log=truth_path)
        started.append(sim)
        return sim.start()

    yield start
    for sim in started:
        sim.stop()


class SimSince:
    """A simulator shared by a module's tests, seen from one test: `truth()` holds only the
    records written since the test began (a module's tests run one after another on one
    worker, and each waits for its own requests), everything else is the shared SimProcess.
    Even forked (tests/forkserver.py), each simulator is a process, a port and its /health
    wait; a module whose tests all use the same flags starts one."""

    def __init__(self, sim: SimProcess) -> None:
        self._sim = sim
        self._before = len(sim.truth())

    def __getattr__(self, name: str):
        return getattr(self._sim, name)

    def truth(self, expect: int | None = None, timeout: float = 10.0) -> list[dict]:
        wanted = None if expect is None else self._before + expect
        return self._sim.truth(expect=wanted, timeout=timeout)[self._before :]


def shared_sim(*flags: str):
    """A module-scoped fixture: one simulator with these flags for the whole module. Tests take
    `SimSince(that_fixture)` so that each reads only its own part of the truth log."""

    @pytest.fixture(scope="module")
    def fixture(tmp_path_factory):
        with ForkedSim(*flags, truth_log=tmp_path_factory.mktemp("shared-sim") / "truth.jsonl") as sim:
            yield sim

    return fixture


def pytest_configure(config):
    """This checkout's modules compiled once, before any worker starts: where bytecode is not
    written (PYTHONDONTWRITEBYTECODE), every child benchy (each simulator, each run with a
    process of its own) would compile them again from source, ~0.2 CPU-s for a run's imports.
    compileall writes only what is out of date, into the usual (ignored) __pycache__ folders.
    The test modules likewise: pytest caches its assert-rewritten code only where bytecode is
    written, so each worker would rewrite all of them again (~4 CPU-s a worker)."""
    if sys.dont_write_bytecode and not hasattr(config, "workerinput"):
        compileall.compile_dir(REPO_ROOT / "benchy", quiet=1)
        compileall.compile_dir(REPO_ROOT / "tests", quiet=1)
        _cache_rewritten_test_modules(config)


def _cache_rewritten_test_modules(config) -> None:
    """Writes pytest's own cache of the rewritten test modules (what it writes itself where
    bytecode is written), which every worker reads even when it writes none. Leans on pytest's
    rewrite module: with another pytest, the workers rewrite as they did."""
    try:
        from _pytest.assertion import rewrite

        state = config.stash[rewrite.assertstate_key]
        for path in sorted((REPO_ROOT / "tests").rglob("*.py")):
            if not (path.name.startswith("test_") or path.name == "conftest.py"):
                continue
            cache_dir = rewrite.get_cache_dir(path)
            pyc = cache_dir / (path.name[:-3] + rewrite.PYC_TAIL)
            if rewrite._read_pyc(path, pyc) is None and rewrite.try_makedirs(cache_dir):
                source_hash, code = rewrite._rewrite_test(path, config)
                rewrite._write_pyc(state, code, source_hash, pyc)
    except (ImportError, AttributeError, KeyError, TypeError):
        return
