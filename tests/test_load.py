"""Load modes (issue 9): open-loop rate, --max-inflight, --duration / --requests, goodput and
--workers, over real HTTP against `benchy sim`, checked against its ground-truth log."""

from __future__ import annotations

import dataclasses
import json
import signal
import subprocess
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchy.load import arrivals
from benchy.measure.slo import goodput, parse_slo
from benchy.records import RequestRecord, read_records
from benchy.records.plan import Tagged
from tests.conftest import cmdline, records_in, run_benchy_here, start_benchy, worker_pids


def benchy(*args: str) -> subprocess.CompletedProcess:
    return run_benchy_here(*args)


def run_results(sim, out, *args: str) -> dict:
    proc = benchy("run", "--base-url", sim.base_url, "--quiet", "--output", str(out), "--no-report", *args)
    assert proc.returncode == 0, proc.stderr
    return json.loads((out / "results.json").read_text())


def measured_truth(sim, results: dict) -> list[dict]:
    ids = {r["request_id"] for c in results["cases"] for r in c["requests"] if not r["warmup"]}
    truth = [t for t in sim.truth(expect=len(ids)) if t["request_id"] in ids]
    assert len(truth) == len(ids)
    return truth


# ---------------------------------------------------------------- the schedule itself


@given(n=st.integers(1, 500), rate=st.floats(0.1, 1000), seed=st.integers(0, 2**32))
def test_arrival_offsets_are_sorted_inside_their_window_and_seeded(n, rate, seed):
    offsets = arrivals.arrival_offsets(n, rate, seed)
    assert len(offsets) == n and offsets == sorted(offsets)
    assert 0 <= offsets[0] and offsets[-1] <= n / rate
    assert offsets == arrivals.arrival_offsets(n, rate, seed)


@given(total=st.integers(0, 300), workers=st.integers(1, 16))
def test_worker_shares_partition_the_indices(total, workers):
    shares = [list(arrivals.share(total, w, workers)) for w in range(workers)]
    assert sorted(i for s in shares for i in s) == list(range(total))
    assert max(map(len, shares)) - min(map(len, shares)) <= 1


def test_exponential_gaps_like_a_poisson_process():
    gaps = [b - a for a, b in zip(*(lambda o: (o, o[1:]))(arrivals.arrival_offsets(5000, 10.0, 1)))]
    mean = sum(gaps) / len(gaps)
    share_short = sum(g < mean for g in gaps) / len(gaps)
    assert mean == pytest.approx(0.1, rel=0.02)
    assert share_short == pytest.approx(1 - 2.718281828**-1, abs=0.03)  # P(gap < mean) of an exponential


# ---------------------------------------------------------------- rate mode against the simulator


def test_rate_mode_offers_the_asked_rate_as_the_server_sees_it(start_sim, tmp_path):
    """Two worker processes share the schedule: each sends its round-robin part of it."""
    sim = start_sim("--preset", "instant")
    results = run_results(
        sim,
        tmp_path / "out",
        "--pp",
        "64",
        "--tg",
        "4",
        "--rate",
        "80",
        "--requests",
        "240",
        "--warmup",
        "0",
        "--workers",
        "2",
    )
    (case,) = results["cases"]
    assert case["label"] == "pp64 tg4 r80" and case["mode"] == "open" and case["n_ok"] == 240
    assert case["client"]["workers"] == 2
    truth = {t["request_id"]: t for t in measured_truth(sim, results)}
    reqs = sorted((r for r in case["requests"] if not r["warmup"]), key=lambda r: r["index"])  # not the alone ones
    assert case["send_lag"]["n"] == 240
    offsets = arrivals.arrival_offsets(240, 80.0, 0)  # --seed 0 + case index 0
    start = reqs[0]["scheduled_mono_s"] - offsets[0]
    assert all(r["scheduled_mono_s"] - start == pytest.approx(offsets[r["index"]], abs=1e-6) for r in reqs)
    # The server sees the schedule (one monotonic clock): no request before its time, and the
    # spread of arrivals is the schedule's, give or take the send lag benchy measured and
    # reported, and a hop to the server.
    assert all(r["scheduled_mono_s"] <= r["sent_mono_s"] <= truth[r["request_id"]]["arrival_s"] for r in reqs)
    hop_s = 0.05
    arrivals_s = sorted(t["arrival_s"] for t in truth.values())
    served_rate = (len(arrivals_s) - 1) / (arrivals_s[-1] - arrivals_s[0])
    asked_span, lag = offsets[-1] - offsets[0], case["send_lag"]["max"]
    assert asked_span - lag - hop_s <= arrivals_s[-1] - arrivals_s[0] <= asked_span + lag + hop_s
    assert case["achieved_rate"] == pytest.approx(served_rate, rel=0.02)


def test_max_inflight_caps_the_server_load_and_shows_the_queue_delay(start_sim, tmp_path):
    sim = start_sim("--decode-tps", "100", "--prefill-tps", "100000")
    results = run_results(
        sim,
        tmp_path / "out",
        "--pp",
        "64",
        "--tg",
        "10",
        "--rate",
        "50",
        "--max-inflight",
        "2",
        "--requests",
        "16",
        "--warmup",
        "0",
    )
    truth = measured_truth(sim, results)
    spans = [(t["arrival_s"], t["last_token_event_s"]) for t in truth]
    busiest = max(sum(a <= s < b for a, b in spans) for s, _ in spans)
    assert busiest <= 2
    (case,) = results["cases"]
    # 16 arrivals in ~0.3 s, served two at a time at ~0.1 s each: later sends wait ~0.5 s+.
    assert case["send_lag"]["max"] > 0.3
    lags = sorted(r["sent_mono_s"] - r["scheduled_mono_s"] for r in case["requests"] if not r["warmup"])
    assert lags[-1] == pytest.approx(case["send_lag"]["max"])


def test_duration_bounds_a_closed_loop_case(start_sim, tmp_path):
    sim = start_sim("--decode-tps", "200", "--prefill-tps", "100000", "--max-running", "64")
    results = run_results(
        sim, tmp_path / "out", "--pp", "64", "--tg", "20", "-c", "3", "--duration", "1", "--warmup", "0"
    )
    (case,) = results["cases"]
    reqs = [r for r in case["requests"] if not r["warmup"]]
    sends = sorted(r["sent_mono_s"] for r in reqs)
    assert sends[-1] - sends[0] < 1.0
    # Three streams of ~0.1 s requests for 1 s: about 30, every one of them finished and counted.
    assert 6 <= case["n_ok"] == len(reqs) <= 40  # more than two rounds, never past the time
    assert {r["request_id"] for r in reqs} == {t["request_id"] for t in measured_truth(sim, results)}


def test_goodput_counts_requests_meeting_every_slo(start_sim, tmp_path):
    # A token every 5 ms: an instant answer of 8 tokens can arrive in one read, which is buffered
    # (the first token waited for all the others) and has no TTFT to judge an SLO by.
    sim = start_sim("--prefill-tps", "100000", "--decode-tps", "200")
    args = ("--pp", "64", "--tg", "8", "-c", "2", "--requests", "10", "--warmup", "0")
    case = run_results(sim, tmp_path / "out", *args, "--slo", "ttft=5s,e2e_tps=1")["cases"][0]
    assert case["goodput"]["fraction"] == 1.0 and case["goodput"]["slo"] == {"ttft_s": 5.0, "e2e_tps": 1.0}
    assert case["goodput"]["rate"] == pytest.approx(case["request_rate"])
    reqs = [r for r in case["requests"] if not r["warmup"]]  # the requests sent alone first are not measured
    window = max(r["sent_mono_s"] + r["end_s"] for r in reqs) - min(r["sent_mono_s"] for r in reqs)
    assert case["request_rate"] == pytest.approx(10 / window)


def _rec(ok: bool, ttft: float, end: float, tokens: int = 10) -> Tagged:
    rec = Tagged(
        case="x",
        run=0,
        index=0,
        warmup=False,
        request_id="r",
        nonce=None,
        target_prompt_tokens=1,
        target_output_tokens=tokens,
        end_s=end,
        completion_tokens=tokens,
        token_event_s=[ttft + 0.01 * i for i in range(tokens)],
        token_event_chars=[1] * tokens,
        token_event_kinds="c" * tokens,
    )
    return rec if ok else dataclasses.replace(rec, status="error", error_kind="http_500")


def test_goodput_formula_failed_requests_never_meet_the_slo():
    slo = parse_slo("ttft=200ms,e2e_tps=5")
    records = [_rec(True, 0.1, 1.0), _rec(True, 0.3, 1.0), _rec(True, 0.1, 4.0), _rec(False, 0.1, 1.0)]
    assert goodput(records, slo) == 0.25  # only the first meets both; the failed one counts


# ---------------------------------------------------------------- several worker processes


FIGURES = ("summary", "metrics")  # metric name -> figure, or null when unavailable
REASONS = ("unavailable", "unavailable_codes")


def _form(value):
    """The shape of a results value: its keys, at every depth (a list: the union of its items').
    Which figures could be measured is not shape: on a busy machine one stall can deliver a
    whole short stream in one read, leaving no decode interval. So figures keep only their
    metric names, and the reasons for the unavailable ones are left out."""
    if isinstance(value, dict):
        return {
            k: sorted(v) if k in FIGURES and isinstance(v, dict) else _form(v)
            for k, v in value.items()
            if k not in REASONS
        }
    if isinstance(value, list):
        merged: dict = {}
        for item in value:
            form = _form(item)
            merged.update(form if isinstance(form, dict) else {"[item]": form})
        return merged
    return "value"


def test_workers_results_are_identical_in_form_to_one_workers(start_sim, tmp_path):
    # 1 ms between tokens: quick, and every metric measurable on a quiet machine.
    sim = start_sim("--decode-tps", "1000", "--prefill-tps", "1000000", "--max-running", "64")
    args = ("--pp", "64", "--tg", "16", "-c", "4", "--runs", "3", "--warmup", "1")
    one = run_results(sim, tmp_path / "one", *args, "--workers", "1")
    two = run_results(sim, tmp_path / "two", *args, "--workers", "2")
    case1, case2 = one["cases"][0], two["cases"][0]
    assert case1["client"]["workers"] == 1 and case2["client"]["workers"] == 2
    # Warnings depend on how busy this machine is (client_overloaded), not on the workers.
    assert _form({**one, "warnings": []}) == _form({**two, "warnings": []})
    assert (case2["n_ok"], case2["n_failed"]) == (case1["n_ok"], case1["n_failed"]) == (12, 0)
    ids = [r["request_id"] for r in case2["requests"]]
    assert len(ids) == len(set(ids)) == 3 + 13  # 3 sent alone first (load/alone.py), 1 warmup, 12
    records = read_records(tmp_path / "two" / "requests.jsonl")
    assert sorted(r.request_id for r in records) == sorted(ids)
    truth = {t["request_id"]: t for t in sim.truth(expect=32)}
    for req in case2["requests"]:  # each worker's records carry times the server agrees with
        t = truth[req["request_id"]]
        assert req["completion_tokens"] == t["completion_tokens"] == (1 if req["alone"] else 16)
        assert req["sent_mono_s"] <= t["arrival_s"] <= req["sent_mono_s"] + req["end_s"]


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "args, words",
    [
        (("--rate", "2", "-c", "4"), "cannot be combined"),
        (("--max-inflight", "2"), "needs --rate"),
        (("--rate", "0"), "--rate must be positive"),
        (("--slo", "ttft=fast"), "not a number"),
        (("--slo", "speed=3"), "expected NAME=VALUE"),
        (("--duration", "0"), "--duration"),
    ],
)
def test_bad_load_flags_fail_in_one_line(args, words):
    proc = benchy("run", "--base-url", "http://127.0.0.1:9/v1", *args)
    assert proc.returncode == 2
    assert words in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert "Traceback" not in proc.stderr


# ---------------------------------------------------------------- the client's fast paths


# How each event of a vLLM-shaped chat stream starts, up to its choices.
_HEAD = b'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":'


def _stream(contents: list[str]) -> bytes:
    """A vLLM-shaped chat stream: role chunk, content deltas, a finish, usage, [DONE]."""
    head = _HEAD.removeprefix(b"data: ").decode()
    events = [head + '[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}']
    events += [
        head
        + '[{"index":0,"delta":{"content":'
        + json.dumps(c, ensure_ascii=False)
        + '},"logprobs":null,"finish_reason":null}]'
        + ("" if i % 3 else ',"usage":null')
        + "}"
        for i, c in enumerate(contents)
    ]
    events.append(head + '[{"index":0,"delta":{},"logprobs":null,"finish_reason":"length"}]}')
    events.append(head + '[],"usage":{"prompt_tokens":5,"completion_tokens":%d}}' % len(contents))
    events.append("[DONE]")
    return "".join(f"data: {e}\n\n" for e in events).encode()


def _read(body: bytes, cuts: list[int], plain: bool) -> dict:
    from benchy.client.draft import Draft
    from benchy.client.reader import StreamReader

    rec = RequestRecord(
        case="x",
        run=0,
        index=0,
        warmup=False,
        request_id="r",
        nonce=None,
        target_prompt_tokens=5,
        target_output_tokens=1,
    )

    class Reference(StreamReader):  # every event through the JSON parse
        __slots__ = ()

        def _learn_head(self, data: str) -> None:
            pass

    reader = StreamReader(Draft(rec)) if plain else Reference(Draft(rec))
    points = sorted({min(c, len(body)) for c in cuts} | {0, len(body)})
    for i, (a, b) in enumerate(zip(points, points[1:])):
        reader.feed(body[a:b], float(i))
    reader.close(float(len(points)))
    rec = reader.rec.record()
    return rec.to_dict()


@settings(deadline=None)  # a busy machine may take a second over the first example
@given(
    contents=st.lists(st.text(min_size=1, max_size=6), min_size=1, max_size=30),
    cuts=st.lists(st.integers(0, 4000), max_size=12),
)
def test_reader_fast_paths_record_exactly_what_a_full_json_parse_does(contents, cuts):
    """Escapes, quotes, control characters, non-ASCII, odd chunking: the byte-level and
    string-level shortcuts must give the record the general path gives, field for field."""
    body = _stream(contents)
    fast, reference = _read(body, cuts, True), _read(body, cuts, False)
    assert fast == reference
    assert fast["completion_tokens"] == len(contents) and fast["anomalies"] == []


_TAIL = b'},"logprobs":null,"finish_reason":null}]}\n\n'
# Raw events a read of plain events may hold: plain ones, and ones the plain path must leave to
# the JSON parse (an escape, a NUL or a control byte, a line led by a NUL, a bare quote, a cut multi-byte character,
# a line separator, a head inside a string, a non-plain tail, a comment), as a server could send.
_RAW_EVENTS = [
    _HEAD + b'[{"index":0,"delta":{"content":"' + text + b'"' + _TAIL
    for text in (b"a", b" word", "é世".encode(), b"x\\ny", b"nul\x00", b"bell\x07", "\u2028".encode(), b"\xe4\xb8")
] + [
    _HEAD + b'[{"index":0,"delta":{"content":"q\\"' + _HEAD.removeprefix(b"data: ") + b'"' + _TAIL,
    _HEAD + b'[{"index":0,"delta":{"content":"end"},"logprobs":null,"finish_reason":"stop"}]}\n\n',
    b": keep-alive\n\n",
    b"\x00\n\n",
    b'\x00not a head"' + _TAIL,  # a line of no field: ignored, unless a NUL were taken for a head
]


@settings(deadline=None)
@given(
    events=st.lists(st.sampled_from(_RAW_EVENTS), min_size=1, max_size=40),
    cuts=st.lists(st.integers(0, 6000), max_size=10),
)
def test_a_read_of_many_events_books_what_the_json_parse_does(events, cuts):
    """The plain path takes a read's run of plain events at once: whatever raw bytes follow or
    hide among them, and however the reads cut them, the record is the general path's."""
    learnt = _HEAD + b'[{"index":0,"delta":{"content":"first"' + _TAIL  # teaches the plain shape
    body = learnt + b"".join(events) + b"data: [DONE]\n\n"
    assert _read(body, cuts, True) == _read(body, cuts, False)


def _counting_reader():
    """A draft and a stream reader for it that counts the bytes its plain path booked."""
    from benchy.client.draft import Draft
    from benchy.client.reader import StreamReader

    class Counting(StreamReader):
        __slots__ = ("plain_bytes",)

        def _plain_events(self, chunk: bytes, now: float) -> int:
            done = super()._plain_events(chunk, now)
            self.plain_bytes += done
            return done

    rec = RequestRecord(
        case="x",
        run=0,
        index=0,
        warmup=False,
        request_id="r",
        nonce=None,
        target_prompt_tokens=5,
        target_output_tokens=50,
    )
    reader = Counting(Draft(rec))
    reader.plain_bytes = 0
    return reader.rec, reader  # the draft: what the reader booked so far


def test_plain_content_events_skip_the_json_parse():
    rec, reader = _counting_reader()
    body = _stream([f" w{i}" for i in range(50)])
    for event in body.split(b"\n\n")[:-1]:  # one event per read, as a fast server sends them
        reader.feed(event + b"\n\n", 0.0)
    reader.close(1.0)
    assert len(rec.token_event_s) == 50 and rec.content_chars == sum(len(f" w{i}") for i in range(50))
    assert reader.plain_bytes > 0.9 * len(body) * 48 / 54  # all but the first content event and the ends


def test_an_answer_in_one_read_takes_the_plain_path_after_its_first_content_event():
    # A server faster than its reader: the whole stream arrives in one read. Once the first
    # content event has taught the plain shape, the rest of that read goes the plain way too.
    rec, reader = _counting_reader()
    body = _stream([f" w{i}" for i in range(50)])
    reader.feed(body, 0.5)
    reader.close(1.0)
    assert rec.token_event_s == [0.5] * 50 and rec.completion_tokens == 50 and rec.finish_reason == "length"
    assert reader.plain_bytes > 0.9 * len(body) * 48 / 54
    assert _read(body, [], True) == _read(body, [], False)  # what the JSON parse of every event gives


def test_sigterm_stops_every_worker_and_keeps_what_they_finished(start_sim, tmp_path):
    sim = start_sim("--decode-tps", "100", "--prefill-tps", "100000", "--max-running", "64")
    out = tmp_path / "out"
    args = ["--base-url", sim.base_url, "--pp", "64", "--tg", "20", "-c", "4", "--runs", "500", "--workers", "2"]
    proc = start_benchy("run", *args, "-o", str(out), "-q", stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    jsonl = out / "requests.jsonl"
    while not (jsonl.exists() and records_in(jsonl.read_bytes()) >= 10):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    workers = set(worker_pids(proc.pid))
    assert len(workers) == 2  # the two worker processes (not the fork server, nor the resource tracker)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 143 and "Traceback" not in err  # 128 + SIGTERM
    assert not any(Path(f"/proc/{w}").exists() and b"multiprocessing" in cmdline(w) for w in workers)
    results = json.loads((out / "results.json").read_text())
    assert results["partial"] and results["stopped"]["by"] == "SIGTERM"
    saved = {r["request_id"] for c in results["cases"] for r in c["requests"]}
    on_disk = {r.request_id for r in read_records(jsonl)}
    assert saved == on_disk and len(saved) >= 10
