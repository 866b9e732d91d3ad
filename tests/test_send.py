"""The one send loop (load/send.py), driven directly over real HTTP against `benchy sim` and
judged by its ground-truth log: how many requests the server really had at once, when each
really arrived, and that a dependent request left only after the answer it was made from."""

from __future__ import annotations

import asyncio
import time

from benchy.client.client import Client
from benchy.client.settings import ClientSettings
from benchy.load.plan import PlannedRequest
from benchy.load.send import Closed, Open, send
from benchy.records import RequestRecord
from benchy.records.plan import RequestTags
from tests.conftest import SimSince, shared_sim

TG = 4
BODY = {"ignore_eos": True, "min_tokens": TG}

# A simulator at 100 tokens/s for the tests that use it (each reads its own part of the truth log).
sim_100 = shared_sim("--decode-tps", "100", "--prefill-tps", "100000")


def request(request_id: str, at_s: float | None = None) -> PlannedRequest:
    rec = RequestRecord("t", 0, 0, False, request_id, None, 0, TG)
    return PlannedRequest(rec, f"question {request_id}", TG, "chat", BODY, at_s=at_s)


def run(sim, requests, pace, on_record=None, stop=None, sent=None) -> list[RequestRecord]:
    """The records of `requests` sent at `pace`; `sent` (a dict) gets each one's tags as it leaves."""
    done: list[RequestRecord] = []

    def keep(rec: RequestRecord) -> None:
        done.append(rec)
        if on_record:
            on_record(rec)

    async def go() -> None:
        async with Client(ClientSettings(base_url=sim.base_url, model="benchy-sim", connections=8)) as client:
            on_sent = (lambda s: sent.__setitem__(s.record.request_id, s.tags)) if sent is not None else None
            await send(client, requests, keep, pace() if callable(pace) else pace, stop, on_sent)

    asyncio.run(go())
    return done


def most_at_once(truth: list[dict]) -> int:
    spans = [(t["arrival_s"], t["last_token_event_s"]) for t in truth]
    return max(sum(a <= s < b for a, b in spans) for s, _ in spans)


def test_a_closed_loop_keeps_its_streams_busy_and_never_more(sim_100):
    sim = SimSince(sim_100)
    done = run(sim, [request(f"c{i}") for i in range(12)], Closed(3))
    assert len(done) == 12 and all(r.ok for r in done)
    truth = sim.truth(expect=12)
    assert {t["request_id"] for t in truth} == {r.request_id for r in done}
    assert most_at_once(truth) == 3


def test_a_dependent_request_leaves_after_the_answer_it_is_made_from(sim_100):
    sim = SimSince(sim_100)
    pause_s, turns = 0.05, 4
    given: list[tuple[str, bool, int | None]] = []  # what each `then` saw of its predecessor

    def chain(name: str, turn: int) -> PlannedRequest:
        req = request(f"{name}t{turn}")

        def then(rec: RequestRecord) -> PlannedRequest | None:
            given.append((rec.request_id, rec.ok, rec.completion_tokens))
            if turn == turns:
                return None
            successor = chain(name, turn + 1)
            successor.pause_s = pause_s
            return successor

        req.then = then
        return req

    done = run(sim, [chain(f"u{u}", 1) for u in range(3)], Closed(3))
    assert len(done) == 3 * turns
    assert sorted(given) == sorted((r.request_id, True, TG) for r in done)  # made from the filled record
    truth = {t["request_id"]: t for t in sim.truth(expect=3 * turns)}
    for u in range(3):
        for turn in range(2, turns + 1):
            before, after = truth[f"u{u}t{turn - 1}"], truth[f"u{u}t{turn}"]
            assert after["arrival_s"] >= before["last_token_event_s"] + pause_s
    assert most_at_once(list(truth.values())) <= 3


def test_a_stop_set_by_a_record_ends_the_closed_loop(start_sim):
    sim = start_sim("--decode-tps", "200", "--prefill-tps", "100000")
    stop = asyncio.Event()
    seen: list[RequestRecord] = []

    def on_record(rec: RequestRecord) -> None:
        seen.append(rec)
        if len(seen) == 3:
            stop.set()

    done = run(sim, [request(f"s{i}") for i in range(20)], Closed(2), on_record, stop)
    # Two streams: the one in flight when the stop came still ends and is recorded.
    assert 3 <= len(done) <= 4
    assert {t["request_id"] for t in sim.truth(expect=len(done))} == {r.request_id for r in done}


def test_an_open_loop_sends_each_at_its_time_and_none_past_the_deadline(sim_100):
    sim = SimSince(sim_100)
    offsets = [0.0, 0.05, 0.1, 0.3, 0.35, 0.6, 5.0, 6.0]  # the last two past the deadline
    starts: list[float] = []

    def pace() -> Open:
        starts.append(time.perf_counter() + 0.05)
        return Open(starts[0], None, starts[0] + 1.0)

    sent: dict[str, RequestTags] = {}
    done = run(sim, [request(f"o{i}", at_s) for i, at_s in enumerate(offsets)], pace, sent=sent)
    assert sorted(r.request_id for r in done) == [f"o{i}" for i in range(6)]
    truth = {t["request_id"]: t for t in sim.truth(expect=6)}
    assert len(truth) == 6
    for i, rec in enumerate(sorted(done, key=lambda r: r.request_id)):
        scheduled = sent[rec.request_id].scheduled_mono_s  # the plan's tag, told as it left
        assert scheduled == starts[0] + offsets[i]
        assert scheduled <= rec.sent_mono_s <= truth[rec.request_id]["arrival_s"]


def test_an_open_loop_cap_holds_the_server_load_and_the_late_sends_show_it(start_sim):
    sim = start_sim("--decode-tps", "20", "--prefill-tps", "100000")
    start: list[float] = []

    def pace() -> Open:
        start.append(time.perf_counter())
        return Open(start[0], 2)

    sent: dict[str, RequestTags] = {}
    done = run(sim, [request(f"k{i}", 0.0) for i in range(8)], pace, sent=sent)
    truth = sim.truth(expect=8)
    assert len(done) == 8 and most_at_once(truth) == 2
    lags = sorted(r.sent_mono_s - (sent[r.request_id].scheduled_mono_s or 0.0) for r in done)
    # The last one waited for the three before it on its slot to end.
    one_request_s = min(t["last_token_event_s"] - t["arrival_s"] for t in truth)
    assert lags[-1] >= 3 * one_request_s


def test_a_sent_record_is_freed_by_dropping_it_not_by_emptying_it(sim_100, tmp_path):
    """The client fills a fresh record, not the plan's: the plan held by its sender stays as
    planned, the record handed on is whole (its streams as the truth log's tokens), and once
    the sink has written it and the chain moved on, nothing holds it, so its streams are
    freed with it (issue 51: `release_streams` emptied arrays in place instead)."""
    import gc

    from benchy.records import RecordWriter, read_records

    sim = SimSince(sim_100)
    writer = RecordWriter(tmp_path / "requests.jsonl")
    handed: list[int] = []  # what the sink saw of each record: its events, not the record

    def chain(name: str, turn: int) -> PlannedRequest:
        req = request(f"{name}t{turn}")
        req.then = (lambda rec: chain(name, turn + 1)) if turn < 3 else None
        return req

    planned = [request(f"alone{i}") for i in range(4)]
    firsts = [chain(f"u{u}", 1) for u in range(2)]

    def sink(rec: RequestRecord) -> None:
        writer.write(rec)
        handed.append(len(rec.token_event_s))

    async def go() -> None:
        async with Client(ClientSettings(base_url=sim.base_url, model="benchy-sim", connections=8)) as client:
            await send(client, [*planned, *firsts], sink, Closed(3))
        writer.close()

    asyncio.run(go())
    truth = {t["request_id"]: t for t in sim.truth(expect=4 + 2 * 3)}
    assert all(p.record.sent_mono_s == 0.0 and not p.record.token_event_s and p.record.end_s is None for p in planned)
    assert all(p.record.end_s is None for p in firsts)  # the plan's record: as planned
    written = list(read_records(tmp_path / "requests.jsonl"))
    assert len(written) == len(handed) == 10
    assert all(len(r.token_event_s) == truth[r.request_id]["completion_tokens"] == TG for r in written)
    assert handed == [TG] * 10  # handed on whole
    del written  # read back from the file: not the sent records
    gc.collect()
    alive = [o for o in gc.get_objects() if isinstance(o, RequestRecord) and o.token_event_s]
    assert not [r for r in alive if r.request_id in truth]  # nothing holds a sent record
