"""Issue 23: the server's own tokenization of the streamed text as a token-count witness.

benchy asks the server's /tokenize (load/tokenize.py) after each case, for the requests whose
count is disputed and a few others to corroborate. The simulator answers /tokenize with its
own word-level vocabulary (sim/vocab.py), not benchy's o200k, so every count here is judged
against the truth log: the tokens the server really generated.
"""

from __future__ import annotations

import json

import pytest

from benchy.load.tokenize import TOKENIZE_DISPUTED_PER_CASE, TOKENIZE_SAMPLE_PER_CASE, chosen, disputed
from benchy.measure import evidence, reading
from benchy.records import WITNESS_OF, RecordWriter, read_records
from benchy.records.plan import PLAN_OF, Tagged
from tests.conftest import warning_codes
from tests.test_checks import measured, truth_of
from tests.test_witnesses import FAST_PREFILL, TRANSPORTS, bench, only_case

NO_USAGE = ("--preset", "no-usage-8-per-event", *FAST_PREFILL)


def tokenize_calls(sim) -> list[dict]:
    """The /tokenize calls the simulator noted (--note-tokenize): when, how many tokens."""
    return [t["tokenize"] for t in sim.truth() if "tokenize" in t]


def in_flight(truth: dict, t_s: float) -> bool:
    """Whether a request was in flight at t_s: from its arrival to its last write."""
    return truth["arrival_s"] <= t_s <= truth["events"][-1]["t_s"]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_without_usage_the_count_is_the_servers_own_tokenization(start_sim, transport):
    sim = start_sim(*NO_USAGE, "--note-tokenize")
    results = bench(sim, transport, tg=(64,), runs=3)
    case = only_case(results)
    truth = truth_of(sim, results)
    for req in measured(case):
        t, count = truth[req["request_id"]], req["token_count"]
        assert count["usage"] is None  # the witness benchy would otherwise lack
        assert count["server_tokenize"] == t["completion_tokens"] == count["tokens"]
        assert count["source"] == evidence.SERVER_TOKENIZE and not count["estimate"]
        assert req["metrics"]["e2e_tps"] == pytest.approx(t["completion_tokens"] / req["metrics"]["e2e_s"])
        assert req["metrics"]["tokens_per_event"] == pytest.approx(t["completion_tokens"] / req["events"])
    assert "no_usage" not in warning_codes(results)  # the count is the server's, not an estimate
    # Off the hot path: no /tokenize came while any of benchy's requests was in flight.
    calls = tokenize_calls(sim)
    assert len(calls) >= len(measured(case))  # calibration asks once too
    assert not [c for c in calls for t in truth.values() if in_flight(t, c["t_s"])]


def test_a_server_without_tokenize_leaves_the_witness_unavailable_silently(start_sim, tmp_path):
    sim = start_sim(*NO_USAGE, "--no-tokenize")
    results = bench(sim, tg=(64,), runs=3, output_dir=tmp_path)
    case = only_case(results)
    assert case["n_failed"] == 0 and case["n_ok"] == 3
    truth = truth_of(sim, results)
    for req in measured(case):
        count = req["token_count"]
        assert count["server_tokenize"] is None and evidence.SERVER_TOKENIZE not in count["disagreed"]
        assert count["source"] != evidence.SERVER_TOKENIZE
        # Without it the count is benchy's estimate, near the truth but not the server's word.
        assert count["estimate"] and count["tokens"] == pytest.approx(
            truth[req["request_id"]]["completion_tokens"], rel=0.2
        )
    # The estimate is said (no_usage), the missing endpoint is not: it is no fault of the server's.
    assert "no_usage" in warning_codes(results)
    assert not [w for w in results["warnings"] if evidence.SERVER_TOKENIZE in json.dumps(w)]
    lines = [json.loads(line) for line in (tmp_path / "requests.jsonl").read_text().splitlines()[1:]]
    records = [line for line in lines if WITNESS_OF not in line and PLAN_OF not in line]  # counts: lines of their own
    assert [line["request_id"] for line in records] == [r["request_id"] for r in case["requests"]]  # all, in order


def test_undisputed_counts_are_corroborated_by_a_small_sample(start_sim, tmp_path):
    sim = start_sim(*FAST_PREFILL, "--decode-tps", "400")
    results = bench(sim, tg=(32,), runs=5, output_dir=tmp_path)
    case = only_case(results)
    truth = truth_of(sim, results)
    asked = [r for r in measured(case) if r["token_count"]["server_tokenize"] is not None]
    assert len(asked) == TOKENIZE_SAMPLE_PER_CASE  # not every request: bounded cost
    for req in measured(case):
        count = req["token_count"]
        assert count["source"] == evidence.USAGE and count["tokens"] == truth[req["request_id"]]["completion_tokens"]
    for req in asked:
        assert req["token_count"]["server_tokenize"] == truth[req["request_id"]]["completion_tokens"]
        assert evidence.SERVER_TOKENIZE in req["token_count"]["backed_by"]
    # requests.jsonl is what the client saw, every record in order as it finished; the server's
    # count came later, on a witness line of its own naming the request, for each one asked.
    lines = [json.loads(line) for line in (tmp_path / "requests.jsonl").read_text().splitlines()[1:]]
    records = [line for line in lines if WITNESS_OF not in line and PLAN_OF not in line]
    assert [line["request_id"] for line in records] == [r["request_id"] for r in case["requests"]]
    assert all(line.get("server_tokenize") is None for line in records)  # not on the record's own line
    witnessed = {line[WITNESS_OF]: line["server_tokenize"] for line in lines if WITNESS_OF in line}
    assert witnessed == {r["request_id"]: r["token_count"]["server_tokenize"] for r in asked}


def test_usage_that_claims_double_is_outvoted_by_the_servers_tokenization_and_the_events(start_sim):
    sim = start_sim("--preset", "usage-double", *FAST_PREFILL, "--decode-tps", "400")
    results = bench(sim, tg=(48,), runs=3)
    assert "usage_mismatch" in warning_codes(results)
    case = only_case(results)
    truth = truth_of(sim, results)
    for req in measured(case):
        t, count = truth[req["request_id"]], req["token_count"]
        assert count["usage"] == t["usage_completion_tokens"] == 2 * t["completion_tokens"]
        assert count["tokens"] == count["server_tokenize"] == t["completion_tokens"]
        # It ended by length (ignore_eos): max_tokens is the exact count, /tokenize and the events back it.
        assert count["source"] == evidence.MAX_TOKENS
        assert {evidence.SERVER_TOKENIZE, evidence.EVENTS} <= set(count["backed_by"])
        assert count["disagreed"] == [evidence.USAGE]


@pytest.mark.parametrize("flags", [(*FAST_PREFILL, "--decode-tps", "400"), NO_USAGE], ids=["usage", "no-usage"])
def test_the_hold_decision_weighs_the_same_count_as_the_figures(start_sim, tmp_path, flags):
    # Each record's keep-or-not for /tokenize is decided after its case from the count alone
    # (reading.token_count), the figures from the whole reading: one verdict, however reached.
    sim = start_sim(*flags)
    results = bench(sim, tg=(32,), runs=4, output_dir=tmp_path)
    truth = truth_of(sim, results)
    records = [r for r in read_records(tmp_path / "requests.jsonl", kind=Tagged) if not r.warmup]
    assert len(records) == 4
    for rec in records:
        count = reading.token_count(rec)
        assert count == reading.read(rec).count
        if rec.completion_tokens is not None:  # usage came: the sim's own count backs it
            assert count.tokens == truth[rec.request_id]["completion_tokens"]
    assert any(disputed(r) for r in records) == (flags is NO_USAGE)


def _record(case: str, index: int, usage: int | None, text: str = "one two three", **kw) -> Tagged:
    words = text.split(" ")
    return Tagged(
        case=case,
        run=0,
        index=index,
        warmup=kw.pop("warmup", False),
        request_id=f"{case}-{index}",
        nonce=None,
        target_prompt_tokens=8,
        target_output_tokens=len(words),
        token_event_s=[0.1 * (i + 1) for i in range(len(words))],
        token_event_chars=[len(w) + (i > 0) for i, w in enumerate(words)],
        token_event_kinds="c" * len(words),
        token_event_text=text,
        completion_tokens=usage,
        usage_reported=usage is not None,
        local_token_scale=1.0,
        **kw,
    )


def test_the_records_asked_about_are_the_first_of_each_quota_in_finish_order():
    """chosen() keeps per case the first TOKENIZE_DISPUTED_PER_CASE disputed records (here: no
    usage) and the first TOKENIZE_SAMPLE_PER_CASE others, in the order they finished; warmups,
    failures and empty answers are never asked about."""
    records = [_record("a", 0, None, warmup=True), _record("a", 1, 3, status="error"), _record("a", 2, 0, text="")]
    records += [_record("a", 3 + i, None if i % 2 else 3) for i in range(2 * TOKENIZE_DISPUTED_PER_CASE + 8)]
    records += [_record("b", i, 3) for i in range(5)]
    picked = chosen(records)
    doubted = [r for r in picked if r.case == "a" and disputed(r)]
    sure = [r for r in picked if r.case == "a" and not disputed(r)]
    assert len(doubted) == TOKENIZE_DISPUTED_PER_CASE and len(sure) == TOKENIZE_SAMPLE_PER_CASE
    assert [r.index for r in sure] == [3, 5]  # the first undisputed ones
    assert [r.index for r in doubted] == [4 + 2 * i for i in range(TOKENIZE_DISPUTED_PER_CASE)]
    assert [r.index for r in picked if r.case == "b"] == [0, 1]
    assert picked == sorted(picked, key=lambda r: records.index(r))  # asked in finish order


def test_a_cases_records_are_read_back_from_where_it_began(tmp_path):
    """The writer reads back exactly the records written since a mark (the case's), whole, in
    the order written: what the /tokenize choice is made from once the case is over."""
    writer = RecordWriter(tmp_path / "requests.jsonl")
    assert list(writer.records_since(writer.mark())) == []  # no file yet: nothing
    writer.write(_record("a", 0, 3))
    mark = writer.mark()
    later = [_record("b", i, None, text="x y") for i in range(3)]
    for rec in later:
        writer.write(rec)
    back = list(writer.records_since(mark))
    assert back == later
    writer.witness(later[0])  # a witness line after them is no record
    assert list(writer.records_since(mark)) == later
    writer.close()
