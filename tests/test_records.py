"""The exchange record's own package (benchy/records): what the live run reads of a record is
defined there once."""

from __future__ import annotations

from benchy.load.tally import CaseTally
from benchy.load.workers import LOCAL_CLOCK, Merge
from benchy.measure import classify
from benchy.records import RequestRecord
from benchy.records.tokens import tokens_of


def _record(i: int, usage: int | None, events: int) -> RequestRecord:
    rec = RequestRecord("c", 1, i, False, f"r{i}", None, 16, 8)
    rec.completion_tokens, rec.usage_reported = usage, usage is not None
    rec.token_event_s = [0.01 * (k + 1) for k in range(events)]
    rec.token_event_chars = [3] * events
    rec.content_chars = 3 * events
    return rec


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
    merge.take(0, {"records": [r.to_dict() for r in records]})
    assert merge.workers[0].tokens == sum(tokens_of(r) for r in records) and len(got) == 3

    failure = classify.output_failure(records[0])
    assert failure is not None and failure[0] == "zero_tokens"
    assert classify.output_failure(records[1]) is None and classify.output_failure(records[2]) is None
