"""Issue 52, item 3: fitted dataset prompts in scripts where one character is several tokens
(CJK, emoji, accented Latin under a byte-level vocabulary that never merged them). The cut used
to assume one more character adds at most one token, so prompts came out 1-2 tokens short of
their target, silently (the prompt slack hid it). A property over random mixes of scripts and
target lengths: every cut is its target by the counter that cut it (the simulator's byte-level
vocabulary, written for this, and benchy's o200k); then end to end against the simulator's truth
log, through its /tokenize and through its usage."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchy.load.dataset_fit import NONCE_SEPARATOR
from benchy.measure import tokenizer
from benchy.sim import vocab
from benchy.workloads import dataset
from tests.conftest import run_benchy_here
from tests.test_checks import measured, truth_of

# Pieces of several scripts: ASCII words and punctuation (one token), CJK (3 bytes), emoji (4),
# accented Latin (2), and whitespace, which merges with what follows in some vocabularies.
PIECES = (" the", " cat", "Hello", ".", ",", "?", " ", "\n", "\n\n", "的", "是", "中国", "人们", "語", "😀", "🚀", "👍🏽",
          "é", "ü", "ñ", "Ω", "€", "12", "-")  # fmt: skip
texts = st.lists(  # each text holds something besides whitespace, as a dataset's prompts do
    st.lists(st.sampled_from(PIECES), min_size=1, max_size=60).map("".join).filter(str.strip), min_size=1, max_size=4
)


@pytest.fixture
def byte_level():
    vocab.use("bytes")
    try:
        yield vocab.count
    finally:
        vocab.use("word")


def _cut(pieces: list[str], share: float, count) -> tuple[int, int]:
    """(the target, what the cut body counts): a target `share` of the way from the head to twice
    the texts (cut_entries runs on through them, wrapping). A target that no cut of the texts
    reaches (o200k: '.🚀' is 2 tokens more than '.', so a text may go from 7 to 9) is the count
    of the longest cut below it: the cut stays short, never long."""
    whole = count(NONCE_SEPARATOR + dataset.JOIN.join(pieces * 2))
    base = count(NONCE_SEPARATOR)
    target = max(base + 1, round(base + share * (whole - base)))
    body = dataset.cut_entries(pieces, 0, target, count, head=NONCE_SEPARATOR)
    stream = "".join(p + dataset.JOIN for p in pieces * 3)  # what cut_entries cuts, wrapping
    counted = count(NONCE_SEPARATOR + body)
    cuts = {count(NONCE_SEPARATOR + stream[:k]) for k in range(len(stream) + 1)}
    if counted < target and target not in cuts:  # no cut reaches it: the longest short of it
        return max(n for n in cuts if n < target), counted
    return target, counted


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pieces=texts, share=st.floats(0.0, 1.0))
def test_every_cut_is_its_target_under_a_byte_level_vocabulary(byte_level, pieces, share):
    target, counted = _cut(pieces, share, byte_level)
    assert counted == target


@settings(max_examples=300, deadline=None)
@given(pieces=texts, share=st.floats(0.0, 1.0))
def test_every_cut_is_its_target_by_o200k(pieces, share):
    target, counted = _cut(pieces, share, tokenizer.count)
    assert counted == target


def test_a_text_no_piece_can_top_up_stays_short_never_long():
    # a counter under which nothing ASCII adds a token: the cut stays at or below the target
    def count(text: str) -> int:
        return sum(3 for ch in text if not ch.isascii())

    cut = dataset.fit_text("中国人们的是" * 4, 7, count)
    assert count(cut) == 6


CJK_DATASET = [
    {"conversations": [{"from": "human", "value": text}, {"from": "gpt", "value": "好"}]}
    for text in (
        "人工智能是计算机科学的一个分支，它企图了解智能的实质，并生产出一种新的能以人类智能相似的方式做出反应的智能机器。"
        * 6,
        "机器学习是人工智能的一个分支。🚀 它使计算机系统能够从数据中学习和改进，而无需进行明确的编程。😀 " * 6,
        "自然言語処理は、人間が日常的に使っている自然言語をコンピュータに処理させる一連の技術である。é ü " * 6,
    )
]


@pytest.mark.parametrize("tokenize", [True, False], ids=["tokenize", "usage"])
def test_a_cjk_dataset_on_a_byte_level_server_is_served_at_its_targets(start_sim, tmp_path, tokenize):
    path = tmp_path / "cjk.json"
    path.write_text(json.dumps(CJK_DATASET, ensure_ascii=False))
    sim = start_sim("--preset", "byte-level", *(() if tokenize else ("--no-tokenize",)))
    out = tmp_path / "out"
    proc = run_benchy_here(
        "run", "--base-url", sim.base_url, "-q", "--no-report", "-o", str(out), "--dataset", str(path),
        "--pp", "256", "700", "--tg", "4", "--runs", "4",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    results = json.loads((out / "results.json").read_text())
    truth = truth_of(sim, results)
    for case in results["cases"]:
        assert case["prompt_lengths"] in ("server_tokenize", "server_usage")
        served = [truth[r["request_id"]]["prompt_tokens"] for r in measured(case)]
        assert served == [case["pp"]] * len(served), case["label"]  # the server's own count, each
    assert "prompt_length_mismatch" not in {w["code"] for w in results["warnings"]}


class _ThreeAChar:
    """A counter under which every non-ASCII character is 3 tokens and nothing ASCII counts."""

    method = "tokenizer_file"
    includes_template = False

    def count_now(self, texts):
        return [sum(3 for ch in t if not ch.isascii()) for t in texts]

    async def count(self, texts):
        return self.count_now(texts)


def test_a_length_no_cut_can_reach_is_named_not_sent_short():
    import asyncio

    from benchy.load.dataset_fit import fit_bodies

    texts = ["中国人们的是" * 10, "机器学习" * 10]
    fitted = asyncio.run(fit_bodies(_ThreeAChar(), texts, [0, 1], [9]))
    assert set(fitted) == {(0, 9), (1, 9)}  # 9 = three characters: every cut lands on it
    with pytest.raises(LookupError, match="no cut of 7 tokens"):  # the case keeps the estimate, said
        asyncio.run(fit_bodies(_ThreeAChar(), texts, [0, 1], [7]))
