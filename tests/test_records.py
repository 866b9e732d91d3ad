"""The exchange record's own package (benchy/records): what the live run reads of a record is
defined there once."""

from __future__ import annotations

from dataclasses import replace

from benchy.load.handoff import Batch
from benchy.load.tally import CaseTally
from benchy.load.workers import LOCAL_CLOCK, Merge
from benchy.measure import classify
from benchy.records import RequestRecord
from benchy.records.plan import RequestTags, Sent
from benchy.records.tokens import tokens_of


def _record(i: int, usage: int | None, events: int) -> RequestRecord:
    return RequestRecord(
        "c", 1, i, False, f"r{i}", None, 16, 8,
        completion_tokens=usage, usage_reported=usage is not None,
        token_event_s=[0.01 * (k + 1) for k in range(events)], token_event_chars=[3] * events, content_chars=3 * events,
    )  # fmt: skip


def test_the_live_run_counts_a_requests_tokens_one_way():
    """The tally, a split case's merge and the failure rule read the same count: the server's
    usage where it gave one, a usage of 0 included (the tally and the merge fell through to the
    events on a 0), else the events."""
    records = [_record(0, 0, 3), _record(1, None, 4), _record(2, 7, 2)]
    assert [tokens_of(r) for r in records] == [0, 4, 7]

    tally = CaseTally()
    for rec in records:
        tally.add(rec)
    assert tally.client_tokens() == sum(tokens_of(r) for r in records)

    got: list[RequestRecord] = []
    merge = Merge([LOCAL_CLOCK], got.append)
    merge.take(0, Batch(records=records))
    assert merge.workers[0].tokens == sum(tokens_of(r) for r in records) and len(got) == 3

    failure = classify.output_failure(records[0])
    assert failure is not None and failure[0] == "zero_tokens"
    assert classify.output_failure(records[1]) is None and classify.output_failure(records[2]) is None


def _failed(i: int, kind: str) -> RequestRecord:
    return replace(_record(i, None, 0), status="error", error_kind=kind, error=f"{kind} #{i}")


def test_the_record_sink_writes_counts_releases_and_stops_in_order(tmp_path):
    """Each record is tallied and written whole to requests.jsonl, and left as it came (its
    memory goes when its sender lets it go: tests/test_send.py); failures are counted as
    results.json counts them (an empty output is one) and the limit passed sets `stop` and
    says why."""
    import asyncio

    from benchy.load.progress import Progress
    from benchy.load.sink import ErrorLimits, RecordSink
    from benchy.records import RecordWriter, read_records

    async def main() -> RecordSink:
        writer = RecordWriter(tmp_path / "requests.jsonl")
        sink = RecordSink(writer, Progress(1, enabled=False), ErrorLimits(max_errors=1))
        sink.open_case("c")
        for rec in [_record(0, 5, 5), _record(9, 5, 5), _record(1, 0, 3), _failed(2, "http_500")]:
            events = list(rec.token_event_s)
            sink(rec)
            assert rec.token_event_s == events  # not emptied in place
        writer.close()
        return sink

    sink = asyncio.run(main())
    written = list(read_records(tmp_path / "requests.jsonl"))
    assert [len(r.token_event_s) for r in written] == [5, 5, 3, 0]
    assert sink.tallies["c"].served == 3 and sink.tallies["c"].client_tokens() == 5 + 5 + 0
    assert (sink.failures.done, sink.failures.failed) == (4, 2)  # the zero_tokens one counts
    assert sink.stop.is_set() and sink.stopped is not None and sink.stopped["by"] == "max-errors"


def test_the_record_sink_stops_a_run_whose_server_is_gone(tmp_path):
    import asyncio

    from benchy.load.progress import Progress
    from benchy.load.sink import ErrorLimits, RecordSink
    from benchy.records import RecordWriter

    async def main() -> RecordSink:
        waiting = RecordSink(RecordWriter(None), Progress(1, enabled=False), ErrorLimits(max_connect_failures=2))
        waiting(_failed(0, "connect"))
        waiting(_failed(1, "connect"))  # in a row, but inside --reconnect-s (10 s): it may come back
        assert not waiting.stop.is_set() and waiting.stopped is None
        limits = ErrorLimits(max_connect_failures=2, reconnect_s=0.0)
        sink = RecordSink(RecordWriter(None), Progress(1, enabled=False), limits)
        sink(_failed(0, "connect"))
        assert not sink.stop.is_set()
        sink(_failed(1, "connect"))
        return sink

    sink = asyncio.run(main())
    assert sink.stopped is not None and sink.stopped["by"] == "server-gone" and "connect #1" in sink.stopped["reason"]


def test_a_split_cases_client_figures_travel_typed_and_save_as_they_are():
    """The workers' loop figures are LoopHealth from the monitor on; the merge makes the case's
    ClientHealth (CPU and samples summed, other figures the worst worker's; a lost worker has
    none), and what results.json saves of it reads back equal."""
    import dataclasses

    from benchy.load.workers import Clock
    from benchy.measure.health import ClientHealth, LoopHealth

    clocks = [Clock(0.0, 0.0, 0.0, 0.0, True, "here"), Clock(0.0, 0.002, 0.01, 0.004, False, "there")]
    merge = Merge(clocks, lambda rec: None)
    merge.take(
        0,
        Batch(records=[_record(0, 5, 5)], figures=LoopHealth(1.0, 0.9, 0.8, 0.0, 0.5, 40, 0.25, 1.0, 0.25)),
    )
    merge.take(1, Batch(records=[_record(1, 7, 7)], figures=LoopHealth(3.0, 2.0, 1.5, 0.1, 0.4, 60, 0.5, 1.1, 0.45)))
    client = merge.client_figures()
    assert isinstance(client, ClientHealth) and client.workers == 2 and client.lost_workers == 0
    assert (client.lag_samples, client.cpu_s, client.loop_lag_ms_max, client.cpu_share) == (100, 0.75, 3.0, 0.45)
    assert client.busiest == "worker 1 on there" and client.clock_uncertainty_s == 0.002
    assert [w.tokens for w in client.per_worker] == [5, 7]
    assert ClientHealth.from_dict(client.to_dict(), strict=True) == client

    lost = Merge(clocks, lambda rec: None)
    lost.take(0, Batch(figures=LoopHealth(1.0, 0.9, 0.8, 0.0, 0.5, 40, 0.25, 1.0, 0.25)))
    lost.lose(1, "gone")
    figures = lost.client_figures()
    assert figures.lost_workers == 1 and figures.lag_samples == 40 and figures.per_worker[1].lag_samples is None
    assert dataclasses.replace(figures) == ClientHealth.from_dict(figures.to_dict(), strict=True)


def test_a_big_batch_goes_in_pieces_that_keep_its_order_and_its_ends():
    """handoff.pieces: at most MAX_RECORDS records a message, the sends and the ready flag on
    the first piece (in flight before finished), the share's end on the last."""
    from benchy.load.handoff import MAX_RECORDS, pieces
    from benchy.measure.health import LoopHealth

    records = [_record(i, 1, 1) for i in range(2 * MAX_RECORDS + 3)]
    end = LoopHealth(lag_samples=7)
    out = pieces(Batch(sent=[Sent(records[0], RequestTags())], records=records, ready=True, figures=end))
    assert [len(p.records) for p in out] == [MAX_RECORDS, MAX_RECORDS, 3]
    assert [r for p in out for r in p.records] == records
    assert (out[0].sent, out[0].ready, out[0].last) == ([Sent(records[0], RequestTags())], True, False)
    assert not any(p.sent or p.ready for p in out[1:]) and [p.last for p in out] == [False, False, True]
    assert out[-1].figures == end and pieces(Batch(records=records[:3])) == [Batch(records=records[:3])]


def test_a_split_cases_record_crosses_the_pipe_as_a_record():
    """A worker hands its finished records on as records (pickled as they are, no dict and
    back: docs/records.md's split-case reshapes); the parent gets each as a new record with
    its times on the parent's clock and every other field as the worker measured it."""
    import dataclasses
    import pickle

    from benchy.load.handoff import pieces
    from benchy.load.workers import Clock

    sent = dataclasses.replace(_record(3, 6, 6), sent_mono_s=100.0, cached_tokens=4)
    tags = RequestTags(scheduled_mono_s=99.5, conversation=2, turn=3)
    planned = Sent(dataclasses.replace(_record(3, 6, 6), sent_mono_s=99.9), tags)
    wire = pickle.loads(pickle.dumps(pieces(Batch(sent=[planned], records=[sent]))[0]))
    assert isinstance(wire.records[0], RequestRecord) and wire.records[0] == sent
    assert isinstance(wire.sent[0], Sent) and wire.sent[0] == planned  # typed: no dict and back
    got: list[RequestRecord] = []
    told: list[Sent] = []
    merge = Merge([Clock(2.5, 0.001, 0.0, 0.0, False, "there")], got.append, told.append)
    merge.take(0, wire)
    [rec] = got
    [leaving] = told  # the parent writes its plan line from it, on its own clock
    shift = Clock(2.5, 0.001, 0.0, 0.0, False, "there").to_parent(0.0)
    assert rec.sent_mono_s == 100.0 + shift and shift != 0.0
    assert leaving.tags == dataclasses.replace(tags, scheduled_mono_s=99.5 + shift)
    assert leaving.record.sent_mono_s == 99.9 + shift
    assert dataclasses.replace(rec, sent_mono_s=100.0) == sent
    assert merge.workers[0].requests == 1 and merge.workers[0].tokens == 6
