"""Output sanity (issue 55): broken answers are flagged, real ones are not.

The no-false-alarm side is judged on samples of real text (tests/data/sanity: public-domain
English, Chinese, Japanese and Russian, and code, JSON, lists, numbers and other languages
written for benchy) and on a property test; the flagged side on the simulator's broken modes,
judged by its truth log (each request's mode and broken tokens), on every API.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchy import run as run_mod
from benchy.checks import sanity as sanity_check
from benchy.client.settings import ClientSettings
from benchy.measure.sanity import scripts, tally
from benchy.measure.sanity import text as judging
from benchy.records.plan import Tagged
from benchy.results.types import RunResult
from benchy.sim import prose, vocab
from benchy.workloads.scenario import sweep
from tests.conftest import run_benchy_here

SAMPLES = Path(__file__).parent / "data" / "sanity"
FAST = ("--prefill-tps", "50000", "--decode-tps", "2000")


def samples(name: str) -> list[str]:
    return (SAMPLES / f"{name}.txt").read_text(encoding="utf-8").split("\n=====\n")


@pytest.mark.parametrize("corpus", ["english", "code", "json", "cjk", "other"])
def test_real_text_of_every_kind_is_not_garbage(corpus):
    blocks = samples(corpus)
    assert len(blocks) >= 9
    for block in blocks:
        found = judging.judge(block)
        assert not found.broken, (found, block[:80])


def test_the_samples_are_judged_in_their_own_scripts():
    """Another script is judged, not skipped: the samples are long enough, and each is read in
    its own writing system."""
    got = {judging.judge(b).script for name in ("cjk", "other") for b in samples(name)}
    assert {"cjk", "cyrillic", "greek", "arabic", "hebrew", "indic", "latin"} <= got
    assert all(judging.judge(b).judged for b in samples("cjk"))


def test_made_up_words_glued_junk_and_loops_are_each_flagged_for_their_own_sign():
    made_up = "".join(vocab.words(60, 7))
    assert judging.judge(made_up).reasons == (judging.NOT_WORDS,)
    loop = samples("english")[0] + " and then the" * 40
    assert judging.REPETITION_LOOP in judging.judge(loop).reasons
    cjk_loop = samples("cjk")[7] + "的" * 80
    assert judging.REPETITION_LOOP in judging.judge(cjk_loop).reasons
    odd = samples("english")[2][:200] + "\ufffd\x06 word \u0301\x7f"
    assert judging.judge(odd).reasons == (judging.ODD_CHARACTERS,)
    soup = " ".join(["Привет", "hello", "你好世界", "مرحبا", "שלום", "नमस्ते"] * 6)
    assert judging.MIXED_SCRIPTS in judging.judge(soup).reasons
    # the same soup without its odd parts is fluent: each sign is needed to flag
    assert not judging.judge(samples("english")[2][:200]).broken


def test_terse_answers_are_never_judged():
    for terse in ("Paris.", "42", "\ufffd\ufffd\ufffd", "yes yes yes yes", "kunvu bilfar"):
        assert not judging.judge(terse).judged


def test_odd_characters_are_what_no_answer_holds_and_marks_on_letters_are_not():
    assert scripts.odd_characters("caf\u0065\u0301 na\u0303o Tiếng Việt") == 0  # marks on letters
    assert scripts.odd_characters("a \u0301b") == 1  # a mark on a space
    assert scripts.odd_characters("x\ufffdy\x00z\ue000") == 3
    assert scripts.odd_characters("tab\tand\nnewline\r\n") == 0


_WORDS = sorted({w.strip(".,") for s in prose.sentences() for w in s.split() if w.strip(".,").isalpha()})


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from(_WORDS), min_size=12, max_size=120),
    st.lists(st.sampled_from([", ", ". ", "; ", " - ", "\n", ": ", "! ", "? "]), min_size=1, max_size=8),
    st.lists(st.integers(min_value=0, max_value=10**6), max_size=12),
    st.random_module(),
)
def test_property_real_words_in_any_order_with_any_punctuation_and_numbers_pass(words, marks, numbers, _):
    """Text of real words, however shuffled, punctuated, numbered or cut, is no garbage:
    word salad of real words is not what this check claims to catch (a loop aside)."""
    rng = random.Random(len(words))
    pieces = [*words, *map(str, numbers)]
    rng.shuffle(pieces)
    out = []
    for p in pieces:
        out.append(p)
        out.append(rng.choice(marks) if rng.random() < 0.2 else " ")
    text = "".join(out)
    assert not set(judging.judge(text).reasons) - {judging.REPETITION_LOOP}, text


@settings(max_examples=100, deadline=None)
@given(st.integers(min_value=0, max_value=10**6), st.integers(min_value=100, max_value=400))
def test_property_every_broken_mode_of_the_simulator_is_flagged_and_prose_never(seed, n):
    clean, _ = prose.texts("prose", n, seed)
    assert not judging.judge("".join(clean)).broken
    for mode in ("garbage", "degraded", "loop"):
        texts, broken = prose.texts(mode, n, seed)
        assert vocab.pieces("".join(texts)) == texts  # one simulator token each, as streamed
        assert broken > 0 and judging.judge("".join(texts)).broken, (mode, "".join(texts)[:120])


def _record(i: int, text: str, **kw) -> Tagged:
    return Tagged("c", 0, i, False, f"r{i}", None, 64, 32, **{"token_event_text": text, "completion_tokens": 32, **kw})


def test_a_case_pattern_identical_answers_and_stops_at_the_first_token():
    same = samples("english")[1]
    t = tally.SanityTally()
    for i in range(6):
        t.add(_record(i, same))
    found = t.result()
    assert found.identical == 6 and found.broken == 0 and sanity_check.flagged(found)
    t = tally.SanityTally()
    for i, block in enumerate(samples("english")[:6]):
        t.add(_record(i, block))
    assert not sanity_check.flagged(t.result())
    t = tally.SanityTally()
    for i in range(5):
        t.add(_record(i, "The", completion_tokens=1, finish_reason="stop"))
    found = t.result()
    assert found.stopped_at_once == 5 and found.judged == 0 and sanity_check.flagged(found)
    t = tally.SanityTally()  # no usage: the answer's events count its tokens
    for i, block in enumerate(samples("english")[:5]):
        t.add(_record(i, block, completion_tokens=None, finish_reason="stop", token_event_s=[0.1] * 40))
    assert t.result().stopped_at_once == 0


def test_one_odd_answer_among_many_is_not_a_verdict():
    t = tally.SanityTally()
    for i, block in enumerate(samples("english")):
        t.add(_record(i, block))
    t.add(_record(99, "".join(vocab.words(40, 3))))
    found = t.result()
    assert found.broken == 1 and not sanity_check.flagged(found)
    assert found.examples[0].request_id == "r99"


def bench(sim, endpoint: str = "chat", runs: int = 4, tg: int = 48, concurrency: int = 2, **more) -> dict:
    """One case of pp64 against `sim`, as saved (tests/test_canary.py runs its canary through it)."""
    settings_ = run_mod.RunSettings(
        client=ClientSettings(base_url=sim.base_url),
        cases=sweep([64], [tg], [concurrency]),
        runs=runs,
        progress=False,
        endpoint=endpoint,
        **{"warmup": 1, **more},
    )
    return run_mod.execute(settings_).to_dict()


def _truth(sim, results: dict) -> dict[str, dict]:
    n = sum(len(c["requests"]) for c in results["cases"])
    return {t["request_id"]: t for t in sim.truth(expect=n) if t["request_id"]}


def test_the_simulators_prose_is_a_clean_run_with_every_answer_judged(start_sim):
    sim = start_sim(*FAST)
    results = bench(sim)
    case = results["cases"][0]
    truth = _truth(sim, results)
    measured = [r for r in case["requests"] if not r["warmup"]]
    assert all(truth[r["request_id"]]["output"] == "prose" for r in measured)
    assert all(truth[r["request_id"]]["broken_tokens"] == 0 for r in measured)
    assert case["sanity"]["judged"] == len(measured) and case["sanity"]["broken"] == 0
    assert "output_garbage" not in {w["code"] for w in results["warnings"]}


@pytest.mark.parametrize("endpoint", ["chat", "completions", "responses", "messages"])
@pytest.mark.parametrize("mode", ["garbage", "degraded", "loop"])
def test_every_broken_mode_is_flagged_on_every_api_with_examples_and_the_figures_kept(start_sim, endpoint, mode):
    sim = start_sim(*FAST, "--output", mode)
    results = bench(sim, endpoint, runs=2, tg=128)
    case = results["cases"][0]
    truth = _truth(sim, results)
    measured = [r for r in case["requests"] if not r["warmup"]]
    broken_truly = [r for r in measured if truth[r["request_id"]]["broken_tokens"] > 0]
    assert broken_truly == measured and all(truth[r["request_id"]]["output"] == mode for r in measured)
    found = case["sanity"]
    assert found["broken"] == found["judged"] == len(measured)
    warning = next(w for w in results["warnings"] if w["code"] == "output_garbage")
    assert warning["case"] == case["label"] and warning["details"]["examples"]
    assert any(ex["request_id"] in truth for ex in found["examples"])
    assert case["summary"]["e2e_tps"] is not None  # the figures stay: they are true
    assert RunResult.from_dict(results).cases[0].sanity.broken == found["broken"]


def test_a_share_of_degraded_tokens_is_flagged_down_to_ten_percent(start_sim):
    sim = start_sim(*FAST, "--output", "degraded", "--degraded-share", "0.1")
    results = bench(sim, tg=96)
    truth = _truth(sim, results)
    case = results["cases"][0]
    measured = [r for r in case["requests"] if not r["warmup"]]
    assert all(truth[r["request_id"]]["broken_tokens"] > 0 for r in measured)
    assert "output_garbage" in {w["code"] for w in results["warnings"]}


def test_every_answer_cut_at_its_first_token_by_eos_is_a_pattern_the_verdict_names(start_sim):
    """A server that ignores ignore_eos and whose model ends every answer at once (EOS first):
    no answer is long enough to judge, but the case is broken all the same."""
    sim = start_sim(*FAST, "--ignore-ignore-eos", "--natural-min", "1", "--natural-max", "1")
    results = bench(sim, runs=3)
    case = results["cases"][0]
    truth = _truth(sim, results)
    measured = [r for r in case["requests"] if not r["warmup"]]
    assert all(truth[r["request_id"]]["completion_tokens"] == 1 for r in measured)
    assert all(truth[r["request_id"]]["finish_reason"] == "stop" for r in measured)
    found = case["sanity"]
    assert found["stopped_at_once"] == found["answers"] == len(measured) and found["judged"] == 0
    warning = next(w for w in results["warnings"] if w["code"] == "output_garbage")
    assert "stopped at their first token" in warning["message"]


@pytest.mark.parametrize("mode", ["prose", "garbage"])
def test_a_harmony_server_speaks_in_its_mode_and_only_garbage_is_flagged(start_sim, mode):
    """gpt-oss's raw completion (--preset gpt-oss-harmony): the analysis and final messages
    speak in --output's mode; sanity judges the text benchy read, markers parsed out."""
    sim = start_sim(*FAST, "--preset", "gpt-oss-harmony", "--output", mode)
    results = bench(sim, endpoint="chat", runs=2, tg=128)
    case = results["cases"][0]
    truth = _truth(sim, results)
    measured = [r for r in case["requests"] if not r["warmup"]]
    assert all((truth[r["request_id"]]["broken_tokens"] > 0) == (mode == "garbage") for r in measured)
    flagged = "output_garbage" in {w["code"] for w in results["warnings"]}
    assert flagged == (mode == "garbage") and case["sanity"]["judged"] == len(measured)


def test_short_answers_that_coincide_are_no_pattern_long_ones_are():
    """Greedy answers a sentence long may well coincide for different prompts (the simulator's
    prose starts with one of 50 sentences): only answers of IDENTICAL_MIN_CHARS count."""
    short = tally.SanityTally()
    for i in range(50):
        short.add(_record(i, "".join(prose.texts("prose", 16, i % 10)[0])))
    found = short.result()
    assert found.long_answers == 0 and found.identical == 0 and not sanity_check.flagged(found)
    long = tally.SanityTally()
    for i in range(8):
        long.add(_record(i, "".join(prose.texts("prose", 96, i % 2)[0])))
    found = long.result()
    assert found.long_answers == found.identical == 8 and sanity_check.flagged(found)


def test_the_report_quotes_the_broken_answers_and_a_rebuild_judges_them_alike(start_sim, tmp_path):
    sim = start_sim(*FAST, "--output", "loop")
    out = tmp_path / "run"
    saved = bench(sim, runs=3, tg=96, concurrency=1, warmup=0, output_dir=out)
    (case,) = saved["cases"]
    example = case["sanity"]["examples"][0]["text"]
    report = (out / "report.md").read_text()
    assert "output_garbage" in report and example[:40] in report
    for name in ("results.json", "report.md", "results.csv"):
        (out / name).unlink()
    made = run_benchy_here("rebuild", str(out))
    assert made.returncode == 0, made.stderr
    rebuilt = json.loads((out / "results.json").read_text())
    assert rebuilt["cases"][0]["sanity"] == case["sanity"]
    assert [w for w in rebuilt["warnings"] if w["code"] == "output_garbage"] == [
        w for w in saved["warnings"] if w["code"] == "output_garbage"
    ]
