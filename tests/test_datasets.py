"""--dataset: the parsers, the shipped sample, fitting real text, and the three modes end to end
against `benchy sim` (real HTTP), each judged by the simulator's truth log and its own tokenizer."""

from __future__ import annotations

import csv
import hashlib
import json
import re
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from benchy.cli import main
from benchy.load import arrivals
from benchy.load.dataset_load import NONCE_SEPARATOR
from benchy.measure import tokenizer
from benchy.report import dataset_view
from benchy.sim import vocab
from benchy.sim.engine import render_chat
from benchy.workloads import dataset, dataset_sample
from benchy.workloads.spec import WorkloadError
from tests.conftest import SimSince, run_benchy_here, shared_sim
from tests.test_schema import validator

FAST = ("--prefill-tps", "200000", "--decode-tps", "4000", "--max-running", "64", "--context-length", "4096")
sim = shared_sim(*FAST)


# ------------------------------------------------------------------ files


def sharegpt_rows(convs: list[list[tuple[str, str]]]) -> list[dict]:
    return [
        {"conversations": [{"from": "human" if r == "user" else "gpt", "value": t} for r, t in conv]} for conv in convs
    ]


def write(path: Path, fmt: str, convs: list[list[tuple[str, str]]]) -> Path:
    """Conversations of (role, text) in one of the formats --dataset reads."""
    if fmt == "sharegpt":
        path = path.with_suffix(".json")
        path.write_text(json.dumps(sharegpt_rows(convs)), encoding="utf-8")
    elif fmt == "messages":
        path = path.with_suffix(".jsonl")
        lines = [json.dumps({"messages": [{"role": r, "content": t} for r, t in c]}) for c in convs]
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    elif fmt == "prompt":
        path = path.with_suffix(".jsonl")
        path.write_text("".join(json.dumps({"prompt": c[0][1], "completion": c[1][1]}) + "\n" for c in convs))
    elif fmt == "text":
        path = path.with_suffix(".jsonl")
        path.write_text("".join(json.dumps({"text": c[0][1]}) + "\n" for c in convs), encoding="utf-8")
    elif fmt == "csv":
        path = path.with_suffix(".csv")
        with path.open("w", newline="", encoding="utf-8") as f:
            out = csv.writer(f)
            out.writerow(["id", "question", "response"])
            out.writerows([i, c[0][1], c[1][1]] for i, c in enumerate(convs))
    elif fmt == "parquet":
        path = path.with_suffix(".parquet")
        pq.write_table(pa.Table.from_pylist(sharegpt_rows(convs)), path)
    elif fmt == "arrow":  # as Hugging Face `datasets` saves a split: the IPC stream format
        path = path.with_suffix(".arrow")
        table = pa.Table.from_pylist([{"messages": [{"role": r, "content": t} for r, t in c]} for c in convs])
        with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)
    return path


# A message of white space alone is no message (the reader drops it: nothing to send), so each has a letter.
TEXT = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\x00"), min_size=1, max_size=40
).filter(str.strip)
PAIRS = st.lists(st.tuples(TEXT, TEXT), min_size=1, max_size=3).map(
    lambda pairs: [turn for u, a in pairs for turn in (("user", u), ("assistant", a))]
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    fmt=st.sampled_from(["sharegpt", "messages", "prompt", "text", "csv", "parquet", "arrow"]),
    convs=st.lists(PAIRS, min_size=1, max_size=5),
)
def test_every_format_reads_back_what_was_written(tmp_path, fmt, convs):
    path = write(tmp_path / uuid.uuid4().hex, fmt, convs)
    got = dataset.load(str(path)).entries
    if fmt in ("prompt", "csv"):  # one prompt and its answer a row
        convs = [c[:2] for c in convs]
    if fmt == "text":  # the text alone
        convs = [c[:1] for c in convs]
    wanted = [[(r, t) for r, t in c if t.strip()] for c in convs]
    wanted = [c for c in wanted if any(r == "user" for r, _ in c)]
    assert [list(e.turns) for e in got] == wanted if wanted else not got


def test_jsonl_named_json_and_long_csv_fields_are_read(tmp_path):
    lines = tmp_path / "lines.json"
    lines.write_text('{"prompt": "one"}\n{"prompt": "two"}\n', encoding="utf-8")
    assert [e.prompt for e in dataset.load(str(lines)).entries] == ["one", "two"]
    long = "word " * 40_000  # 200 kB: past csv's default field limit
    path = write(tmp_path / "long", "csv", [[("user", long), ("assistant", "ok")]])
    assert dataset.load(str(path)).entries[0].prompt == long


def test_a_save_to_disk_folder_reads_its_arrow_files_in_order(tmp_path):
    folder = tmp_path / "saved"
    folder.mkdir()
    first = write(folder / "data-00000-of-00002", "arrow", [[("user", "one"), ("assistant", "1")]])
    second = write(folder / "data-00001-of-00002", "arrow", [[("user", "two"), ("assistant", "2")]])
    (folder / "dataset_info.json").write_text("{}", encoding="utf-8")
    data = dataset.load(str(folder))
    assert [e.prompt for e in data.entries] == ["one", "two"] and data.format == "arrow"
    assert data.sha256 == hashlib.sha256(first.read_bytes() + second.read_bytes()).hexdigest()


def test_shipped_sample_is_the_generated_one():
    shipped = dataset.dataset_path("sample").read_text(encoding="utf-8")
    assert shipped == dataset_sample.text(dataset_sample.generate())
    data = dataset.load("sample")
    assert data.format == "sharegpt-json" and len(data.entries) == 64
    assert max(len(e.user_messages) for e in data.entries) >= 4  # enough turns for --turns 4


@given(target=st.integers(4, 3000), start=st.integers(0, 63))
@example(target=1646, start=30)  # one more character merges two tokens: the bisection's cut was one short
@settings(max_examples=40, deadline=None)
def test_real_text_is_cut_to_the_count(target, start):
    texts = [e.prompt for e in dataset.load("sample").entries]
    head = " nonce words\n"
    cut = dataset.cut_entries(texts, start, target, tokenizer.count, head=head)
    assert tokenizer.count(head + cut) == target
    joined = dataset.JOIN.join(texts[(start + i) % len(texts)] for i in range(len(texts)))
    assert joined.startswith(cut)  # the entries' own text, in order from the drawn one
    long = joined * 2
    fitted = dataset.fit_text(long, target, tokenizer.count, head=head)
    assert long.startswith(fitted) and tokenizer.count(head + fitted) == target


@pytest.mark.parametrize("more", [5, 40, 900])
def test_a_counter_that_merges_across_joins_still_cuts_exactly(more):
    """A join before a text starting with "C" costs one more token than the pieces alone say,
    so the pieces do not add up: the joined text is cut whole instead."""
    texts = [e.prompt for e in dataset.load("sample").entries]
    start = next(k for k in range(len(texts)) if texts[k + 1].startswith("C"))

    def merging(text: str) -> int:
        return tokenizer.count(text) + text.count("\n\nC")

    target = tokenizer.count("\n" + texts[start] + "\n\n") + more  # past the join before a "C"
    cut = dataset.cut_entries(texts, start, target, merging, head="\n")
    assert cut.startswith(texts[start] + "\n\nC") and merging("\n" + cut) == target


# Whitespace-only texts can never make a long prompt under a counter that merges a whitespace
# run into one token (the slow path's doubling never ends) or counts whitespace as nothing (the
# whole-text loop never ends). Run in a child process with a deadline: a hang fails, not waits.
_NEVER_REACHED = """
import re, sys
from benchy.workloads import dataset
counters = {{"runs": lambda s: len(re.findall(r"\\s+|\\S+", s)), "words": lambda s: len(s.split())}}
try:
    dataset.cut_entries(["   ", " \\t ", "\\n"], {start}, {tokens}, counters["{counter}"], head="\\n")
except ValueError as exc:
    print("refused:", exc)
else:
    print("cut")
"""


@pytest.mark.parametrize("counter", ["runs", "words"])
@pytest.mark.parametrize(("start", "tokens"), [(0, 8), (2, 300)])
def test_cut_entries_refuses_texts_that_never_reach_the_length(counter, start, tokens):
    """Texts that add no token however often they wrap are refused with one line naming why,
    in bounded time (it looped for ever: a fitted prompt of whitespace entries)."""
    import subprocess
    import sys

    script = _NEVER_REACHED.format(start=start, tokens=tokens, counter=counter)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("refused:") and f"{tokens} tokens" in done.stdout


def test_cut_entries_takes_whitespace_entries_among_words():
    """A whitespace entry among words is no obstacle: the words wrap on to the length."""
    runs = lambda s: len(re.findall(r"\s+|\S+", s))  # noqa: E731 - a whitespace run is one token
    texts = ["   ", "one two three", "\t"]
    cut = dataset.cut_entries(texts, 0, 25, runs, head="\n")
    assert runs("\n" + cut) == 25


def test_fit_text_with_another_counter_and_too_short_a_text():
    words = lambda s: len(s.split())  # noqa: E731 - a counter unlike o200k: one a word
    assert dataset.fit_text("one two three four five", 3, words) == "one two three "
    with pytest.raises(ValueError):
        dataset.fit_text("one two", 3, words)


# ------------------------------------------------------------------ bad input


BAD = {
    "nope.json": (None, "dataset not found"),
    "broken.json": (b"[{", "not JSON"),
    "object.json": (b'{"conversations": []}', "must be a list"),
    "line.jsonl": (b'{"prompt": "hi"}\n[1, 2]\n', "line.jsonl:2: expected an object"),
    "keys.jsonl": (b'{"question_text": "hi"}\n', "no prompt"),
    "nulls.jsonl": (b'{"prompt": 7}\n', "must be text"),
    "cols.csv": (b"a,b\n1,2\n", "needs a column"),
    "empty.jsonl": (b'{"prompt": "  "}\n', "no entry with a user prompt"),
    "data.txt": (b"hello", "unknown format"),
    "corrupt.parquet": (b"PAR1 not really", "cannot read"),
    "latin1.jsonl": (b'{"prompt": "caf\xe9"}\n', "not UTF-8"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_a_bad_dataset_is_one_line_and_exit_2(capsys, tmp_path, name):
    body, words = BAD[name]
    path = tmp_path / name
    if body is not None:
        path.write_bytes(body)
    with pytest.raises(SystemExit) as done:
        main(["run", "--base-url", "http://127.0.0.1:9/v1", "--dataset", str(path)])
    err = capsys.readouterr().err.strip().splitlines()
    assert done.value.code == 2 and len(err) == 1 and words in err[0], err


def test_missing_pyarrow_says_what_to_install(tmp_path, monkeypatch):
    path = write(tmp_path / "x", "parquet", [[("user", "hi"), ("assistant", "yo")]])
    monkeypatch.setitem(__import__("sys").modules, "pyarrow", None)
    with pytest.raises(WorkloadError, match=r"pip install 'benchy\[datasets\]'") as info:
        dataset.load(str(path))
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    "flags, words",
    [
        (["--dataset", "sample", "--trace", "sample"], "cannot be combined"),
        (["--dataset", "sample", "--turns", "9"], "no conversation has 9 user turns"),
        (["--dataset", "sample", "--turns", "2", "--pp", "64"], "drop --pp"),
        (["--dataset", "sample", "--depth", "512"], "needs --pp"),
        (["--dataset", "sample", "--rate", "2", "-c", "2"], "cannot be combined"),
        (["--dataset-max-tokens", "100"], "need --dataset"),
    ],
)
def test_flags_a_mode_cannot_use(capsys, flags, words):
    with pytest.raises(SystemExit) as done:
        main(["run", "--base-url", "http://127.0.0.1:9/v1", *flags])
    err = capsys.readouterr().err.strip().splitlines()
    assert done.value.code == 2 and len(err) == 1 and words in err[0], err


# ------------------------------------------------------------------ against the simulator


def sample_file(tmp_path: Path, fmt: str) -> str:
    """The shipped sample as a ShareGPT JSON file, or the same conversations as Parquet."""
    if fmt == "sharegpt":
        return "sample"
    rows = json.loads(dataset.dataset_path("sample").read_text(encoding="utf-8"))
    path = tmp_path / "sample.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    return str(path)


def run(sim, out: Path, *flags: str, rc: int = 0) -> dict:
    proc = run_benchy_here("run", "--base-url", sim.base_url, "-q", "-o", str(out), *flags)
    assert proc.returncode == rc, proc.stderr
    return json.loads((out / "results.json").read_text())


def truth_of(sim, requests: list[dict]) -> dict:
    """The truth records of these requests, by request id (the run's calibration ones come too)."""
    ids, extra = {r["request_id"] for r in requests}, 0
    while True:
        records = {t["request_id"]: t for t in sim.truth(expect=len(ids) + extra)}
        if ids <= records.keys():
            return records
        extra += len(ids - records.keys())


def server_count(*messages: str) -> int:
    """Prompt tokens the simulator counts for these user messages (its own template and vocabulary)."""
    return vocab.count(render_chat([{"role": "user", "content": m} for m in messages]))


def drawn(path: str, n: int, seed: int) -> list[dataset.Entry]:
    """The seeded draw a case makes when nothing is filtered or skipped."""
    spec = dataset.DatasetSpec(path)
    return dataset.select(spec, n, seed, lambda text: 1).entries


@pytest.mark.parametrize("fmt", ["sharegpt", "parquet"])
def test_natural_sends_each_drawn_entry_with_its_answer_length(sim, tmp_path, fmt):
    sim = SimSince(sim)
    path = sample_file(tmp_path, fmt)
    results = run(sim, tmp_path / "out", "--dataset", path, "-c", "3", "--requests", "12", "--seed", "5")
    (case,) = results["cases"]
    assert case["kind"] == "dataset"
    setup = results["setup"]["dataset"]
    assert setup["mode"] == "natural" and setup["sha256"] == dataset.load(path).sha256
    assert setup["sampling"][case["label"]] == {
        "sampled": 12,
        "examined": 12,  # 12 of 64 looked at: every one fit
        "eligible": 12,
        "skipped_by_filter": 0,
        "skipped_over_context": 0,
    }
    truth = truth_of(sim, case["requests"])
    scale = results["setup"]["calibration"].get("output_scale") or results["setup"]["calibration"]["scale"]
    measured = sorted((r for r in case["requests"] if not r["warmup"]), key=lambda r: r["index"])
    assert len(measured) == 12
    for rec, entry in zip(measured, drawn(path, 12, 5)):
        served = truth[rec["request_id"]]
        assert rec["nonce"] and served["prompt_tokens_sent"] == server_count(
            rec["nonce"] + NONCE_SEPARATOR + entry.prompt
        )
        assert rec["target_output_tokens"] == max(1, round(tokenizer.count(entry.answer) * scale))
        assert served["completion_tokens"] == rec["target_output_tokens"]
    assert len({r["target_output_tokens"] for r in measured}) > 3  # each its own, not one --tg
    # the report: asked and served lengths, the served ones the server's own counts
    report = (tmp_path / "out" / "report.md").read_text(encoding="utf-8")
    served = dataset_view.spread([truth[r["request_id"]]["prompt_tokens"] for r in measured])
    output = dataset_view.spread([truth[r["request_id"]]["completion_tokens"] for r in measured])
    table = report[report.index("Lengths of the dataset's requests") :]
    row = next(line for line in table.splitlines() if line.startswith("|") and case["label"] in line)
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells == [case["label"], cells[1], served, cells[3], output]
    assert (tmp_path / "out" / "figures" / "dataset-lengths.png").stat().st_size > 0
    validator().validate(results)  # setup.dataset and the kind as the shipped schema says


@pytest.mark.parametrize("fmt", ["sharegpt", "parquet"])
def test_fitted_cuts_real_text_to_the_sweep(sim, tmp_path, fmt):
    sim = SimSince(sim)
    path = sample_file(tmp_path, fmt)
    results = run(sim, tmp_path / "out", "--dataset", path, "--pp", "96", "700", "--tg", "8", "--runs", "3")
    assert [c["label"] for c in results["cases"]] == [f"pp96 tg8 [{Path(path).name}]", f"pp700 tg8 [{Path(path).name}]"]
    assert results["setup"]["dataset"]["mode"] == "fitted"
    fit = results["setup"]["dataset"]
    assert fit["text_scale"] > 0 and fit["text_overhead_tokens"] is not None  # fitted on real text
    assert results["setup"]["calibration"]["method"] == "usage"  # the run's own stays the filler's
    truth = truth_of(sim, [r for c in results["cases"] for r in c["requests"]])
    for case in results["cases"]:
        assert case["prompt_lengths"] == "server_tokenize"  # the cuts counted by the server's /tokenize
        for rec in case["requests"]:
            served = truth[rec["request_id"]]["prompt_tokens_sent"]
            assert served == rec["target_prompt_tokens"] == rec["prompt_tokens"], rec


@pytest.mark.parametrize("fmt", ["sharegpt", "parquet"])
def test_conversations_replay_the_dataset_turns(sim, tmp_path, fmt):
    sim = SimSince(sim)
    path = sample_file(tmp_path, fmt)
    results = run(sim, tmp_path / "out", "--dataset", path, "--turns", "3", "-c", "2", "--tg", "12", "--seed", "2")
    (case,) = results["cases"]
    assert case["kind"] == "multi_turn" and case["label"].endswith(f"[{Path(path).name}]")
    truth = truth_of(sim, case["requests"])
    spec = dataset.DatasetSpec(path, mode="conversations", turns=3)
    conversations = dataset.select(spec, 2, 2, lambda text: 1).entries
    turns = [r for r in case["requests"] if r.get("turn")]
    assert sorted((r["conversation"], r["turn"]) for r in turns) == [(c, t) for c in (0, 1) for t in (1, 2, 3)]
    for rec in turns:
        entry = conversations[rec["conversation"]]
        if rec["turn"] == 1:  # the first message alone: its text is the entry's own
            served = truth[rec["request_id"]]["prompt_tokens_sent"]
            assert served == server_count(rec["nonce"] + NONCE_SEPARATOR + entry.user_messages[0])
        else:  # the history served from the cache, as the conversation implies
            assert truth[rec["request_id"]]["cached_tokens"] >= rec["expected_cached_tokens"] - 16
    assert case["workload"]["reuse"]["reported_hit_rate"] > 0


def test_an_entry_over_the_context_is_skipped_and_counted(start_sim, tmp_path):
    long = " ".join(["word"] * 3000)
    convs = [[("user", long), ("assistant", "short answer")]] + [
        [("user", f"question {i} about bread"), ("assistant", "an answer of a few words")] for i in range(5)
    ]
    path = write(tmp_path / "mixed", "messages", convs)
    server = start_sim(*FAST[:-2], "--context-length", "2048")
    results = run(server, tmp_path / "out", "--dataset", str(path), "--tg", "4", "--warmup", "3")
    (case,) = results["cases"]
    sampling = results["setup"]["dataset"]["sampling"][case["label"]]
    assert sampling == {"sampled": 6, "examined": 6, "eligible": 5, "skipped_by_filter": 0, "skipped_over_context": 1}
    truth = truth_of(server, case["requests"]).values()
    assert all(t["status"] == 200 and t["prompt_tokens_sent"] < 2048 for t in truth)
    assert case["n_failed"] == 0
    # every entry over the context: nothing to send, one line, exit 2
    only_long = write(tmp_path / "long", "messages", convs[:1])
    proc = run_benchy_here("run", "--base-url", server.base_url, "-q", "--dataset", str(only_long))
    assert proc.returncode == 2 and "longer than the server's context" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_length_filters_and_the_seeded_draw(tmp_path):
    spec = dataset.DatasetSpec("sample", min_tokens=50, max_tokens=120)
    entries = dataset.load("sample").entries
    within = [e for e in entries if 50 <= tokenizer.count(e.prompt) <= 120]
    assert 8 < len(within) < len(entries)  # the filter bites, and leaves enough to draw from
    few = dataset.select(spec, 8, 0, tokenizer.count)  # fewer than are eligible: stops at 8
    assert all(e in within for e in few.entries) and len({id(e) for e in few.entries}) == 8
    assert few.eligible == 8 and few.examined == 8 + few.skipped_by_filter < len(entries)
    assert dataset.select(spec, 8, 0, tokenizer.count).entries == few.entries  # seeded
    assert dataset.select(spec, 8, 1, tokenizer.count).entries != few.entries
    many = dataset.select(spec, 2 * len(within), 0, tokenizer.count)  # more: all looked at, then again
    assert (many.examined, many.eligible, many.skipped_by_filter) == (
        len(entries),
        len(within),
        len(entries) - len(within),
    )
    first, second = many.entries[: len(within)], many.entries[len(within) :]
    assert {id(e) for e in first} == {id(e) for e in second} == {id(e) for e in within}


def test_short_answers_of_a_natural_case_are_told_without_a_tg(start_sim, tmp_path):
    server = start_sim(*FAST, "--ignore-ignore-eos", "--natural-min", "4", "--natural-max", "8")
    results = run(server, tmp_path / "out", "--dataset", "sample", "--requests", "6", "--warmup", "0")
    (case,) = results["cases"]
    (warning,) = [w for w in results["warnings"] if w["code"] == "output_length_mismatch"]
    assert "each request's own length" in warning["message"] and "the 0 asked" not in warning["message"]
    truth = truth_of(server, case["requests"])
    short = sum(truth[r["request_id"]]["completion_tokens"] < r["target_output_tokens"] for r in measured_of(case))
    assert warning["details"]["short_requests"] == short > 0
    report = (tmp_path / "out" / "report.md").read_text(encoding="utf-8")
    assert f"{case['label']} ⚠ (short outputs)" in report


def measured_of(case: dict) -> list[dict]:
    return [r for r in case["requests"] if not r["warmup"]]


def test_a_conversation_that_would_outgrow_the_context_is_skipped(start_sim, tmp_path):
    """Its first message is short; a later one would take the history past the context."""
    long = " ".join(["word"] * 2500)
    turns = lambda second: [("user", "a short question"), ("assistant", "an answer"), ("user", second)]  # noqa: E731
    convs = [turns(long)] + [turns(f"follow-up {i}") for i in range(3)]
    path = write(tmp_path / "convs", "messages", [c + [("assistant", "ok")] for c in convs])
    server = start_sim(*FAST[:-2], "--context-length", "2048")
    results = run(server, tmp_path / "out", "--dataset", str(path), "--turns", "2", "-c", "3", "--tg", "4")
    (case,) = results["cases"]
    sampling = results["setup"]["dataset"]["sampling"][case["label"]]
    assert sampling == {"sampled": 3, "examined": 4, "eligible": 3, "skipped_by_filter": 0, "skipped_over_context": 1}
    truth = truth_of(server, case["requests"]).values()
    assert all(t["status"] == 200 and t["prompt_tokens_sent"] < 2048 for t in truth)
    assert case["n_failed"] == 0


def test_natural_at_a_rate_leaves_at_the_seeded_times(sim, tmp_path):
    sim = SimSince(sim)
    results = run(sim, tmp_path / "out", "--dataset", "sample", "--rate", "40", "--requests", "10", "--seed", "7")
    (case,) = results["cases"]
    assert case["label"] == "dataset sample r40" and case["mode"] == "open" and case["rate"] == 40
    rows = sorted(measured_of(case), key=lambda r: r["index"])
    assert len(rows) == 10 and all(r["status"] == "ok" for r in rows)
    wanted = arrivals.arrival_offsets(10, 40.0, 7 + 0)  # --seed + the case's index
    start = min(r["scheduled_mono_s"] for r in rows) - wanted[0]
    assert [round(r["scheduled_mono_s"] - start, 6) for r in rows] == [round(w, 6) for w in wanted]


def test_no_nonce_sends_the_bare_entries(sim, tmp_path):
    sim = SimSince(sim)
    results = run(sim, tmp_path / "out", "--dataset", "sample", "--requests", "4", "--no-nonce", "--seed", "9")
    (case,) = results["cases"]
    rows = sorted(measured_of(case), key=lambda r: r["index"])
    truth = truth_of(sim, case["requests"])
    for rec, entry in zip(rows, drawn("sample", 4, 9)):
        assert rec["nonce"] is None
        assert truth[rec["request_id"]]["prompt_tokens_sent"] == server_count(entry.prompt)
