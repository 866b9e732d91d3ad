"""A tool call's frame is time inside the server, not in front of it.

A server's own TTFT (vLLM's `time_to_first_token` histogram) ends at the first token it
generates. When the answer is a tool call, those first tokens are the call's frame, which the
server's tool-call parser keeps for itself: the client's first event is the call's name, sent
only once the name is whole. Measured on real vLLM 0.32 (hermes parser, tests/vllmserver/
test_vllm_tools.py): `<tool_call>`, `{"name": "`, the name and its closing quote were 14 to 22
tokens of the tiny model's small vocabulary before the name left (a real model's tokenizer
spells the same frame in fewer). So where a case's answers open with a call, the client's TTFT
holds up to FRAME_TOKENS inter-token gaps the server made and counted, and the comparison with
the server's TTFT (checks/server.py: ttft_outside_server) allows for them.
"""

from __future__ import annotations

import math

from benchy.results.types import CaseResult

# The most tokens a parser's frame takes before a call's name is whole (22 seen, above).
FRAME_TOKENS = 24


def frame_s(case: CaseResult) -> float:
    """The time a tool call's frame explains of the case's mean TTFT: FRAME_TOKENS inter-token
    gaps where every answer opened with a call (its time to first tool call is its TTFT), else 0.
    Answers that wrote text or reasoning first showed their first token on time: no allowance."""
    ttft, ttftc, itl = case.summary.get("ttft_s"), case.summary.get("ttftc_s"), case.median("itl_s")
    if ttft is None or ttftc is None or itl is None or ttft.mean is None or ttftc.mean is None:
        return 0.0
    opened = ttftc.n == ttft.n and math.isclose(ttftc.mean, ttft.mean, rel_tol=1e-9, abs_tol=1e-12)
    return FRAME_TOKENS * itl if opened else 0.0


def cut_whole(case: CaseResult) -> int:
    """Answers without a call that came whole (--no-stream) and stopped at the length limit.
    A server parses a whole answer's calls only when they are complete: vLLM's hermes parser
    fails on a call max_tokens cut (json.loads of its half) and returns the model's raw
    `<tool_call>{"name": …` as content, which reads as text, though its grammar enforced the
    call. Streamed, the same cut call arrives as a call's events."""
    return sum(not r.streamed and not r.tool_calls and r.finish_reason == "length" for r in case.measured_ok())
