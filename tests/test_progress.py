"""Progress where stderr is a log, not a terminal: whole lines every few seconds, an ETA that
holds per case, and no made-up total for a case bounded only by time."""

from __future__ import annotations

import re

import pytest

from benchy.cli import main
from benchy.load import progress

LINE = re.compile(r"^\[(\d+)/(\d+)\] (.+?): (\d+)(?:/(\d+))? requests.*?\[(\d+):(\d+)(?:<(\d+):(\d+))?")


def run_benchy(capsys, *args: str) -> list[str]:
    with pytest.raises(SystemExit) as done:
        main(["run", *args])
    err = capsys.readouterr().err
    assert done.value.code == 0, err
    assert "\r" not in err  # a log gets whole lines, never a bar redrawn in place
    return err.splitlines()


def parsed(lines: list[str]) -> list[dict]:
    out = []
    for line in lines:
        m = LINE.match(line)
        if m:
            case_no, n_cases, label, done, total, em, es, rm, rs = m.groups()
            out.append(
                {
                    "case": int(case_no),
                    "cases": int(n_cases),
                    "label": label,
                    "done": int(done),
                    "total": int(total) if total else None,
                    "elapsed": int(em) * 60 + int(es),
                    "eta": int(rm) * 60 + int(rs) if rm is not None else None,
                }
            )
    return out


def test_a_log_gets_a_line_every_few_seconds_and_an_eta_that_holds_per_case(start_sim, capsys, monkeypatch):
    monkeypatch.setattr(progress, "PLAIN_LINE_EVERY_S", 0.5)
    # 100 tok/s: a tg10 request takes 0.1 s, a tg100 one 1 s; a run-wide ETA would mix them
    sim = start_sim("--decode-tps", "100", "--prefill-tps", "200000")
    lines = parsed(run_benchy(capsys, "--base-url", sim.base_url, "--pp", "64", "--tg", "10", "100", "--runs", "5"))

    short = [p for p in lines if p["label"] == "pp64 tg10"]
    long = [p for p in lines if p["label"] == "pp64 tg100"]
    assert short and long and {p["cases"] for p in lines} == {2}
    assert {p["total"] for p in long} == {5}  # the 5 measured: the warmup is not counted
    assert len(long) >= 6  # about 6 s at one line per 0.5 s, whether or not a request ended
    assert [p["done"] for p in long] == sorted(p["done"] for p in long) and long[-1]["done"] == 5
    for p in long:
        if 2 <= p["done"] < 5:  # the estimate, once a couple of requests have set the pace
            # It follows this case's own pace (seconds per request so far, within tqdm's smoothing
            # and whole-second display), which a busy machine may slow; a run-wide pace mixing in
            # the 0.1 s requests would come out about 3x lower.
            pace, remaining = p["elapsed"] / p["done"], p["total"] - p["done"]
            assert remaining * pace / 2 - 1 <= p["eta"] <= remaining * pace * 2 + 1, p


def test_a_closed_loop_bounded_by_duration_shows_no_total_and_no_eta(start_sim, capsys, monkeypatch):
    monkeypatch.setattr(progress, "PLAIN_LINE_EVERY_S", 0.3)
    sim = start_sim("--decode-tps", "200", "--prefill-tps", "200000")
    lines = run_benchy(capsys, "--base-url", sim.base_url, "--pp", "64", "--tg", "40", "-c", "2", "--duration", "2")
    bars = [line for line in lines if line.startswith("[1/1] pp64 tg40 c2 (for 2 s)")]
    assert len(bars) >= 3
    for line in bars:
        assert not re.search(r"\d+/\d+ requests", line) and "<" not in line, line  # no "5/1", no ETA
    counts = [int(m.group(1)) for m in (re.search(r"(\d+) requests", line) for line in bars) if m]
    assert counts == sorted(counts) and counts[-1] >= 5


def test_the_count_is_of_measured_requests_and_a_warmup_says_so(start_sim, capsys, monkeypatch):
    monkeypatch.setattr(progress, "PLAIN_LINE_EVERY_S", 0.2)
    # 0.5 s a request: two warmups take about a second, long enough for lines to say so
    sim = start_sim("--decode-tps", "40", "--prefill-tps", "200000")
    lines = run_benchy(
        capsys, "--base-url", sim.base_url, "--pp", "64", "--tg", "20", "--requests", "3", "--warmup", "2"
    )
    bars = parsed(lines)
    assert {p["total"] for p in bars} == {3} and bars[-1]["done"] == 3  # --requests 3 reads 3, not 5
    warming = [line for line in lines if "warming up" in line]
    assert warming and all(re.search(r": 0/3 requests", line) for line in warming)
