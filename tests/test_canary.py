"""--canary (issue 55): fixed prompts with checkable answers, sent greedily before the sweep,
saved in the run (setup.canary), and what changed between two runs' canaries in
`benchy compare`. The simulator is no model: it answers every prompt with prose drawn from the
prompt, so its canary fails, the same way each time, and differently once it speaks garbage;
it scores an echoed prompt as its --output's model would (sim/prose.py logprobs), and says so
in its truth log.
"""

from __future__ import annotations

import json
import math

import pytest

from benchy.measure.sanity import canary
from benchy.report import compare as compare_mod
from benchy.report import markdown
from benchy.results.types import RunResult
from tests.test_sanity import bench

FAST = ("--prefill-tps", "50000", "--decode-tps", "3000")


def test_each_prompt_knows_a_right_answer_from_a_wrong_one():
    by_name = {p.name: p for p in canary.prompts("CANARY-AB12")}
    right = {
        "arithmetic": "17 × 23 = 391",
        "copy": "CANARY-AB12",
        "count_words": "9",
        "json": 'Sure: {"city": "Paris", "year": 1889}',
    }
    wrong = {
        "arithmetic": "3910",
        "copy": "CANARY-AB13",
        "count_words": "19",
        "json": '{"city": "Paris", "year": "1889"}',
    }
    for name, p in by_name.items():
        assert p.passes(right[name], p.expected), name
        assert not p.passes(wrong[name], p.expected), name
    assert not by_name["json"].passes("{not json}", by_name["json"].expected)


def test_perplexity_is_read_from_an_echoed_prompts_logprobs():
    body = {
        "choices": [{"logprobs": {"token_logprobs": [None, -1.0, -2.0, -3.0, -0.5]}}],
        "usage": {"prompt_tokens": 4, "completion_tokens": 1},
    }
    values = canary.prompt_logprobs(body)
    assert values == [-1.0, -2.0, -3.0]  # the first has none, the generated one is not the prompt's
    assert math.exp(-sum(values) / 3) == math.exp(2.0)


def _run(sim, with_canary: bool = True) -> dict:
    return bench(sim, runs=2, tg=16, concurrency=1, warmup=0, canary=with_canary)


def test_the_canary_is_sent_saved_and_compared(start_sim):
    sim = start_sim(*FAST)
    first, second = _run(sim), _run(sim)
    found = first["setup"]["canary"]
    assert [a["name"] for a in found["answers"]] == ["arithmetic", "copy", "count_words", "json"]
    # the simulator speaks prose, not answers: every prompt fails, its answer kept whole
    assert all(a["answer"] and not a["passed"] and a["sha256"] for a in found["answers"])
    assert found["perplexity"] > 1 and found["perplexity_unavailable"] is None  # it echoes logprobs
    # sent before the sweep, greedily: the truth log's first requests, apart from the calibration's
    truth = sim.truth()
    measured_ids = {r["request_id"] for c in first["cases"] for r in c["requests"]}
    first_measured = min(i for i, t in enumerate(truth) if t["request_id"] in measured_ids)
    assert sum(1 for t in truth[:first_measured] if t["endpoint"] == "chat") >= len(found["answers"])
    same = {
        c.name: c.change for c in compare_mod.compare(RunResult.from_dict(first), RunResult.from_dict(second)).canary
    }
    # the same server answers the same prompt the same way; the copy prompt carries each run's
    # own nonce, which the simulator (no model) does not copy
    assert same == {
        "arithmetic": "same answer",
        "copy": "answer changed",
        "count_words": "same answer",
        "json": "same answer",
        "perplexity": "+0.0%",
    }
    assert RunResult.from_dict(json.loads(json.dumps(first))).setup.canary.passed == 0


def test_compare_shows_the_canary_answers_that_changed_with_the_server(start_sim):
    clean, broken = start_sim(*FAST), start_sim(*FAST, "--output", "garbage")
    a, b = RunResult.from_dict(_run(clean)), RunResult.from_dict(_run(broken))
    comparison = compare_mod.compare(a, b, "prose", "garbage")
    changed = {c.name: c.change for c in comparison.canary}
    assert {changed[n] for n in ("arithmetic", "count_words", "json")} == {"answer changed"}
    text = compare_mod.markdown([comparison])
    assert "Canary (--canary)" in text and "| arithmetic |" in text
    garbage_answer = next(x.answer for x in b.setup.canary.answers if x.name == "arithmetic")
    assert garbage_answer.split()[0] in text  # the answer itself is quoted


def test_a_run_without_the_canary_sends_none_and_compare_says_nothing_of_it(start_sim):
    sim = start_sim(*FAST)
    plain = _run(sim, with_canary=False)
    assert "canary" not in plain["setup"]
    comparison = compare_mod.compare(RunResult.from_dict(plain), RunResult.from_dict(plain))
    assert comparison.canary == [] and "Canary" not in compare_mod.markdown([comparison])


def test_the_perplexity_of_the_passage_is_what_the_server_scored_and_rises_on_a_broken_model(start_sim):
    """The simulator echoes a completion's prompt with log-probabilities (as vLLM does): its
    truth log keeps the mean it gave, which the canary's perplexity must equal; a broken
    model finds the passage far less likely, and compare says by how much."""
    clean, broken = start_sim(*FAST), start_sim(*FAST, "--output", "garbage")
    a, b = _run(clean), _run(broken)
    for run, sim in ((a, clean), (b, broken)):
        found = run["setup"]["canary"]
        (scored,) = [t for t in sim.truth() if t.get("echo_logprob_mean") is not None]
        assert found["perplexity"] == pytest.approx(math.exp(-scored["echo_logprob_mean"]), rel=1e-9)
        assert found["perplexity_tokens"] == scored["prompt_tokens"] - 1
    assert b["setup"]["canary"]["perplexity"] > 50 * a["setup"]["canary"]["perplexity"]
    (ppl,) = [
        c for c in compare_mod.compare(RunResult.from_dict(a), RunResult.from_dict(b)).canary if c.name == "perplexity"
    ]
    assert ppl.change.startswith("+") and ppl.change.endswith("%")


def test_a_failed_canary_is_a_warning_naming_each_wrong_answer_and_a_working_model_draws_none(start_sim):
    """The simulator is no model: its canary fails, and the run says so by name, with what came
    back. Played as a working model (--answers: it works out what it is asked), the same canary
    passes and the run draws no such warning; the truth log holds what each answer was."""
    failing = _run(start_sim(*FAST))
    [said] = [w for w in failing["warnings"] if w["code"] == "canary_failed"]
    answers = failing["setup"]["canary"]["answers"]
    assert said["severity"] == "warning" and said["details"]["asked"] == len(answers) == 4
    assert said["details"]["failed"] == [a["name"] for a in answers]
    assert "failed 4 of 4" in said["message"]
    report = RunResult.from_dict(failing)
    assert (
        "Canary",
        "0 of 4 fixed prompts answered right (wrong: arithmetic, copy, count_words, json); "
        f"perplexity of the fixed passage {failing['setup']['canary']['perplexity']:.3f}",
    ) in markdown.setup_rows(report)
    for a in answers:  # each wrong answer quoted beside what was expected
        assert (
            f"{a['name']}: expected {a['expected']!r}, answered {' '.join(a['answer'].split())[:60]!r}"
            in said["message"]
        )

    working = start_sim(*FAST, "--answers")
    passing = _run(working)
    found = passing["setup"]["canary"]
    assert found["answers"] and all(a["passed"] for a in found["answers"])
    assert not [w for w in passing["warnings"] if w["code"] == "canary_failed"]
    spoken = {t["request_id"]: t for t in working.truth() if t.get("request_id")}
    sweep = [r for c in passing["cases"] for r in c["requests"] if not r["warmup"]]
    assert all(spoken[r["request_id"]]["output"] == "prose" for r in sweep)  # no question there: prose
