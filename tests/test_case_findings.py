"""The per-case buffering verdict as a finding class (results/findings.py BufferedStreams):
its detection, the metrics it withholds (its code's one entry) and its evidence, on a real
run against the simulator judged by the simulator's own log."""

from __future__ import annotations

from benchy.measure import registry, unavailable
from benchy.results.findings import BUFFERED_STREAMS, BufferedStreams, CaseFinding
from benchy.results.verdicts.codes import VERDICTS, Code
from tests.conftest import SimSince, run_json, shared_sim

buffered_sim = shared_sim("--preset", "buffered", "--decode-tps", "1000", "--prefill-tps", "50000")


def test_a_buffer_is_half_the_requests_or_more_not_one_late_read():
    finding = BufferedStreams()
    assert finding.decide([]) is None
    assert finding.decide([None, "lumpy", None]) is None  # one late read: a live case
    half = finding.decide(["SSE buffering: 32 tokens in 2 events", None, "other", None])
    assert half is not None and half.code == unavailable.BUFFERED
    assert half.message == "2 of 4 requests: SSE buffering: 32 tokens in 2 events"
    every = finding.decide(["first", "second"])
    assert every is not None and every.message == "first"  # every one: its own words


def test_the_finding_owns_its_code_and_the_metrics_it_withholds():
    assert isinstance(BUFFERED_STREAMS, CaseFinding) and BUFFERED_STREAMS.code is Code.SSE_BUFFERING
    assert BUFFERED_STREAMS.withholds == VERDICTS[Code.SSE_BUFFERING].withholds
    assert set(BUFFERED_STREAMS.withholds) == set(registry.STREAM_TIMING_METRICS)


def test_a_buffered_case_withholds_exactly_the_findings_metrics(buffered_sim, tmp_path):
    """The simulator sends each answer in 2 events (its log says how many tokens each carried):
    every successful request's and the case's stream timings are withheld for the finding's
    reason, and nothing else is."""
    sim = SimSince(buffered_sim)
    results = run_json(sim, tmp_path, "--pp", "64", "--tg", "32", "--requests", "4", "--warmup", "0")
    (case,) = results["cases"]
    sent = {r["request_id"] for r in case["requests"]}
    truth = [t for t in sim.truth() if t["request_id"] in sent]
    assert len(truth) == len(sent) == 4
    for t in truth:  # what the server really sent: every answer's tokens in two events
        carried = [e for e in t["events"] if e.get("tokens")]
        assert t["completion_tokens"] == sum(e["tokens"] for e in carried) == 32 and len(carried) <= 2, carried
    withheld = {name for name, code in case["unavailable_codes"].items() if code == unavailable.BUFFERED}
    shown = set(BUFFERED_STREAMS.withholds) & (set(case["summary"]) | set(case["unavailable_codes"]))
    assert withheld == shown and "ttft_s" in withheld
    assert case["summary"]["e2e_s"] is not None  # the whole answer's time is no stream timing
    for request in case["requests"]:
        assert request["status"] == "ok"
        assert {k for k, v in request["unavailable_codes"].items() if v == unavailable.BUFFERED} == shown
        assert all(request["metrics"][name] is None for name in shown)
    assert "sse_buffering" in {w["code"] for w in results["warnings"]}
