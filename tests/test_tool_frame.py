"""A tool call's frame is time inside the server (benchy/checks/tool_frame.py): where every
answer opened with a call, the client's TTFT (the call's name) comes the frame's tokens after
the server's own (its first generated token), and ttft_outside_server allows for them instead
of blaming something in front of the server. On real vLLM CPU with the hermes parser the name
left 14 to 22 tokens after the first (tests/vllmserver/test_vllm_tools.py)."""

from __future__ import annotations

from benchy.checks import outputs, tool_frame
from benchy.checks import server as sc
from benchy.results.types import RunResult
from tests.test_server_checks import case, hist, request, server, summary

ITL = 0.010
AWAKE = {"client": {"loop_lag_ms_max": 5.0, "loop_lag_ms_p95": 2.0}}


def answers(client_ttft: float, first_call: float | None, server_ttft: float = 0.050):
    """A case of four answers: TTFT `client_ttft`, time to first tool call `first_call` (None:
    no call), the server's own TTFT `server_ttft`."""
    metrics = {"ttft_s": client_ttft, "ttftc_s": first_call}
    figures = {"ttft_s": summary(client_ttft), "itl_s": summary(ITL)}
    if first_call is not None:
        figures["ttftc_s"] = summary(first_call)
    reqs = [request(metrics=metrics) for _ in range(4)]
    return case(server(histograms={"ttft_s": hist(server_ttft)}), reqs, summary=figures, **AWAKE)


def test_answers_that_open_with_a_call_allow_for_its_frame():
    # 150 ms between the server's first token and the call's name: 15 inter-token gaps of frame
    opened = answers(0.200, 0.200)
    assert tool_frame.frame_s(opened) == tool_frame.FRAME_TOKENS * ITL
    assert sc.outside_figures(opened) is None
    # the same gap before a text answer is outside the server (as before)
    found = sc.outside_figures(answers(0.200, None))
    assert found is not None and found.cause == "in_front"


def test_a_call_after_text_or_a_gap_beyond_the_frame_is_still_outside():
    # text came first (the call 100 ms after TTFT): the first token was on time, no allowance
    wrote_first = answers(0.200, 0.300)
    assert tool_frame.frame_s(wrote_first) == 0.0
    assert sc.outside_figures(wrote_first) is not None
    # 550 ms is far beyond a frame of 24 gaps (240 ms): a proxy's wait is still named
    found = sc.outside_figures(answers(0.600, 0.600))
    assert found is not None and found.cause == "in_front" and found.bound_s > tool_frame.FRAME_TOKENS * ITL


def ignored(streamed: bool, finish: str) -> str:
    """The tool_choice_ignored message of a --tool-choice required case whose four answers held
    no call, came `streamed` or whole and ended by `finish`."""
    reqs = [request(streamed=streamed, finish_reason=finish, tool_calls=0, content_chars=76) for _ in range(4)]
    setup = {"tool_choice": "required", "tools": []}
    [w] = [w for w in outputs.tool_choice_ignored(case(None, reqs), RunResult.from_dict({"setup": setup}))]
    return w.message + " " + w.hint


def test_whole_answers_cut_at_the_limit_are_not_said_to_be_unenforced():
    """vLLM, --no-stream: the call max_tokens cut is unparseable, so the server answers its raw
    `<tool_call>{"name": …` as content (its grammar did enforce the call): benchy says either
    cause may hold and how to tell them apart, not that the server ignored the choice."""
    cut = ignored(streamed=False, finish="length")
    assert "could not parse a call the limit cut" in cut and "without --no-stream" in cut
    # streamed, or ended by the model: a call would have shown; the choice was not enforced
    for said in (ignored(streamed=True, finish="length"), ignored(streamed=False, finish="stop")):
        assert "the server did not enforce the choice" in said and "limit cut" not in said
