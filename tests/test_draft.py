"""The exchange record is made once, when the answer closes (issue 51 item 1): the client books
what arrives into its own Draft (client/draft.py), and every way a request can end (answered,
failed, retried, cut by the drain) makes one frozen RequestRecord, which nothing downstream can
write into. Judged over real HTTP against `benchy sim` and its truth log."""

from __future__ import annotations

import asyncio
import dataclasses
import socket
import time
import typing

import pytest

from benchy.client.client import Client
from benchy.client.draft import ANSWER_FIELDS, Draft
from benchy.client.settings import ClientSettings
from benchy.load import drain
from benchy.load.plan import PlannedRequest
from benchy.load.send import Closed, send
from benchy.records import RequestRecord
from benchy.records.plan import TAG_NAMES, RequestTags, Tagged
from tests.conftest import SimSince, bare_record, shared_sim

instant_sim = shared_sim("--instant")

# The record's fields the client does not write: its key and what was asked (the plan's), the
# streams' joined text and kinds (made from the draft's pieces), and the late witnesses asked
# after the case (their own requests.jsonl lines).
PLANS = {
    "case", "run", "index", "warmup", "request_id", "nonce", "target_prompt_tokens", "target_output_tokens",
}  # fmt: skip
# The workload tags (the calibration's scale, where the request stands in its workload, its
# images, its schedule): the plan's alone, on no record (records/plan.py), joined by request id.
TAGS = {
    "local_token_scale", "local_scale_from_usage", "local_scale_generated", "usage_at_known",
    "reused_context_tokens", "scheduled_mono_s", "conversation", "turn", "group", "expected_cached_tokens",
    "unique_tokens", "history_reasoning", "control", "alone", "prompt_slack", "images", "image_bytes",
}  # fmt: skip
JOINED = {"token_event_text", "token_event_kinds"}
LATE = {"server_tokenize", "tokenizer_tokens"}


def _planned(rid: str, tg: int) -> RequestRecord:
    return dataclasses.replace(bare_record(), request_id=rid, target_output_tokens=tg)


def _stream(base_url: str, planned: RequestRecord, tg: int) -> RequestRecord:
    async def go() -> RequestRecord:
        async with Client(ClientSettings(base_url=base_url)) as client:
            return await client.stream(planned, "hi", tg, "chat", {"ignore_eos": True})

    return asyncio.run(go())


def _assert_whole(rec: RequestRecord) -> None:
    """A made record's streams agree with each other, and it refuses writes."""
    assert len(rec.token_event_kinds) == len(rec.token_event_s) == len(rec.token_event_chars)
    assert len(rec.token_event_text) == sum(rec.token_event_chars)
    with pytest.raises(dataclasses.FrozenInstanceError):
        rec.status = "ok"  # type: ignore[misc]


def test_the_client_hands_out_a_frozen_record_of_what_the_server_sent(instant_sim):
    sim = SimSince(instant_sim)
    planned = _planned("draft-ok", 8)
    rec = _stream(sim.base_url, planned, 8)
    (truth,) = sim.truth(expect=1)
    assert rec.ok and rec.request_id == truth["request_id"] == "draft-ok"
    assert rec.completion_tokens == truth["completion_tokens"] == 8
    assert len(rec.token_event_s) == sum(1 for e in truth["events"] if e["tokens"])
    _assert_whole(rec)
    assert rec.token_event_text and rec.sent_mono_s > 0 and rec.end_s is not None
    assert planned == _planned("draft-ok", 8)  # the plan's record is as planned: the client made a new one


def test_a_failed_request_is_a_frozen_record_too():
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    rec = _stream(f"http://127.0.0.1:{port}/v1", _planned("draft-refused", 4), 4)
    assert rec.status == "error" and rec.error_kind and rec.end_s is not None
    _assert_whole(rec)


def test_a_request_the_drain_cuts_keeps_what_arrived_as_one_record(start_sim):
    """Cut while streaming: its record is made from the draft at the cut, with the text that
    had arrived (before, the cut record kept the events' times but not their text)."""
    sim = start_sim("--decode-tps", "40", "--prefill-tps", "200000")
    got: list[RequestRecord] = []
    request = PlannedRequest(_planned("draft-cut", 200), "hi", 200, "chat", {"ignore_eos": True})

    async def go() -> None:
        async with Client(ClientSettings(base_url=sim.base_url)) as client:
            await send(client, [request], got.append, Closed(1, deadline=time.perf_counter() + 0.2, drain_s=0.6))

    asyncio.run(go())
    (rec,) = got
    (truth,) = sim.truth(expect=1)
    assert rec.error_kind == drain.DRAIN_CUT and truth["finish_reason"] == "abort"
    assert 0 < len(rec.token_event_s) <= truth["completion_tokens"] < 200
    _assert_whole(rec)
    assert request.record == _planned("draft-cut", 200)


def test_a_draft_closes_once():
    """The record is made once: asked again (the drain after the client closed it), it is the same."""
    draft = Draft(bare_record())
    draft.texts.append("hi")
    draft.kinds.append("c")
    draft.token_event_s.append(0.1)
    draft.token_event_chars.append(2)
    made = draft.record()
    assert made.token_event_text == "hi" and made.token_event_kinds == "c"
    assert draft.cut(drain.DRAIN_CUT, "late", 1.0) is made and made.ok


def test_the_drafts_fields_are_the_records_answer_fields():
    """The draft carries the record's answer fields by the same names, types and defaults, so
    that the record is made from it field for field; every other field of the record is the
    plan's, joined from the draft's pieces, or a late witness."""
    record_fields = {f.name: f for f in dataclasses.fields(RequestRecord)}
    draft_fields = {f.name: f for f in dataclasses.fields(Draft)}
    assert set(ANSWER_FIELDS) <= set(record_fields)
    for name in ANSWER_FIELDS:
        mine, theirs = draft_fields[name], record_fields[name]
        assert mine.type == theirs.type, name
        made = mine.default_factory() if callable(mine.default_factory) else mine.default
        want = theirs.default_factory() if callable(theirs.default_factory) else theirs.default
        assert made == want, name
    assert set(record_fields) - set(ANSWER_FIELDS) == PLANS | JOINED | LATE
    hints = typing.get_type_hints(Draft)
    assert hints["planned"] is RequestRecord


def test_a_record_has_no_workload_tag_the_plan_holds_them():
    """The exchange record carries what was asked and what came, never where the request stands
    in its workload: those tags are the plan's (RequestTags, on PlannedRequest), and only a row
    joined by request id (Tagged, RequestResult) holds both."""
    record_fields = {f.name for f in dataclasses.fields(RequestRecord)}
    assert not record_fields & TAGS
    assert set(TAG_NAMES) == TAGS == {f.name for f in dataclasses.fields(RequestTags)}
    assert {f.name for f in dataclasses.fields(Tagged)} == record_fields | TAGS
    assert {f.name for f in dataclasses.fields(PlannedRequest)} >= {"record", "tags"}
    with pytest.raises(TypeError):
        RequestRecord("c", 0, 0, False, "r", None, 1, 1, turn=2)  # type: ignore[call-arg]


def test_a_record_crosses_a_pipe_frozen():
    """--workers and Ray carry records by pickle: a frozen slotted record goes and comes back equal."""
    import pickle

    rec = dataclasses.replace(bare_record(), token_event_s=[0.1], token_event_chars=[1], token_event_text="a")
    back = pickle.loads(pickle.dumps(rec))
    assert back == rec and back is not rec
    with pytest.raises(dataclasses.FrozenInstanceError):
        back.end_s = 1.0  # type: ignore[misc]
