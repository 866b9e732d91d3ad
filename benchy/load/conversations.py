"""Multi-turn conversations: each turn resends the whole history, as chat and agent clients do.

U conversations (the case's concurrency) run at once, each a dependent chain of the send loop
(send.py): turn k sends the earlier user messages and the server's own answers (as it
streamed them) plus a new user message of the case's pp tokens, waits for the whole answer
(tg tokens), pauses a think time (fixed or seeded exponential/lognormal), then sends turn k+1.
Reasoning of earlier turns is dropped from the history, as gpt-oss's chat format does
(`keep_reasoning` sends it back as `reasoning_content`).

Each new user message is led by its own nonce, so a cache can hold the history and nothing of
the new message. A turn's record says what an ideal cache would serve it
(`expected_cached_tokens`: the previous turn's prompt, as the server counted it, which the
server has prefilled already) and how many tokens at its end are new (`unique_tokens`): a
server reporting less than expected has evicted the history, more than prompt − unique has
leaked something across conversations (or the nonce is broken). A later turn's length is not a
fitted prompt but a window over the history as the server renders it (`_target_prompt`): the
row's length check then catches a cut history or added text, not the template or the answer.
A failed turn ends its conversation: its record is kept and counted, the turns after it are
not sent.

`cold_baseline`: once the conversations are over, each turn index is sent again as U requests
at once (the same concurrency) of a single nonce-led message as long as that turn's median
prompt, so nothing is shared: the TTFT of the same lengths with nothing cached, which the
turn's TTFT is set against (records marked `control`).
"""

from __future__ import annotations

import functools
import math
import time
from dataclasses import replace
from typing import NamedTuple

from benchy.jsontypes import JsonObject
from benchy.load.plan import CaseIO, CasePlan, PlannedRequest, multi_turn_spec, request_options
from benchy.load.prompts import PromptError, PromptFactory
from benchy.load.send import Closed, send
from benchy.measure import tokenizer
from benchy.measure.evidence import estimate_slack
from benchy.records import CONTENT, REASONING, RequestRecord
from benchy.records.plan import RequestTags, Sent


async def run_conversations(plan: CasePlan, case_io: CaseIO) -> None:
    """Warmups (one-message conversations, not counted, one at a time), then every
    conversation at once: a dependent load, each turn made from the answer before it."""
    client, prompts, on_record, start = case_io.client, case_io.prompts, case_io.on_record, case_io.start
    on_sent = case_io.on_sent
    if plan.endpoint == "completions":
        raise PromptError(
            "a multi-turn case needs a chat-templated endpoint: the server's template renders the history"
        )
    body = request_options(plan, plan.case.tg)
    await send(client, warmup_requests(plan, prompts, body), on_record, Closed(1), on_sent=on_sent)
    start_s = await start() if start else time.perf_counter()
    deadline = start_s + plan.duration_s if plan.duration_s is not None else float("inf")
    sent: list[Served] = []  # every turn's count, for the cold baseline's lengths (not its record)
    turns: dict[str, int | None] = {}  # request id → its turn (the plan's tag), while in flight

    def leaving(request: Sent) -> None:
        turns[request.record.request_id] = request.tags.turn
        if on_sent is not None:
            on_sent(request)

    def keep(rec: RequestRecord) -> None:
        sent.append(Served(turns.pop(rec.request_id, None), rec.ok, rec.prompt_tokens))
        on_record(rec)

    firsts = [Conversation(plan, prompts, c, body).first() for c in range(plan.case.concurrency)]
    await send(client, firsts, keep, Closed(len(firsts), deadline, plan.drain_window), on_sent=leaving)
    if multi_turn_spec(plan).cold_baseline:
        for turn, length in enumerate(_turn_lengths(plan, sent), 1):
            if length is None or time.perf_counter() >= deadline:
                continue
            controls = [_control(plan, prompts, turn, length, u, body) for u in range(plan.case.concurrency)]
            await send(client, controls, on_record, Closed(len(controls)), on_sent=on_sent)  # U at once, nothing shared


def warmup_requests(plan: CasePlan, prompts: PromptFactory, body: JsonObject) -> list[PlannedRequest]:
    """One-message conversations of the first turn's length, recorded as warmups."""
    spec = multi_turn_spec(plan)
    requests = []
    for i in range(plan.warmup):
        message = prompts.message(spec.first_tokens or plan.case.pp)
        rec = _record(plan, f"w{i}", -1, i, message.nonce, warmup=True)
        requests.append(_chat(plan, rec, prompts.calibration.tags(), [_user(message.text)], body))
    return requests


class Conversation:
    """One conversation's turns, each planned from the record of the turn before it (the
    server's answer goes into the history): `first()` is turn 1, and every turn's `then`
    plans the next, a think-time pause after it, or None (the last turn, or a failed one:
    the history has no answer to go on with, so the conversation ends there)."""

    def __init__(self, plan: CasePlan, prompts: PromptFactory, index: int, body: JsonObject) -> None:
        self.plan, self.prompts, self.index, self.body = plan, prompts, index, body
        self.spec = multi_turn_spec(plan)
        self.pauses = self.spec.think.draws(plan.seed * 100_003 + plan.index * 1_009 + index)
        self.messages: list[JsonObject] = []  # the history as the last turn sent it

    def first(self) -> PlannedRequest:
        return self._turn(1, None)

    def next_turn(self, previous: RequestRecord, turn: int) -> PlannedRequest | None:
        """The turn after `turn` (the plan's: the record knows no turn), made from its record."""
        if not previous.ok or turn >= self.spec.turns:
            return None
        self.messages = [*self.messages, assistant_message(previous, self.spec.keep_reasoning)]
        request = self._turn(turn + 1, previous)
        request.pause_s = next(self.pauses)
        return request

    def _turn(self, turn: int, previous: RequestRecord | None) -> PlannedRequest:
        plan, prompts = self.plan, self.prompts
        tokens = self.spec.first_tokens if turn == 1 and self.spec.first_tokens else plan.case.pp
        # --dataset: the sampled conversation's own message (dataset_load.DatasetPrompts.turn)
        message = prompts.turn(self.index, turn) if hasattr(prompts, "turn") else prompts.message(tokens)
        unique = prompts.unique_tokens(message)
        # a dataset's message: its own length, none asked
        length = (
            Length(0, None) if hasattr(prompts, "turn") else _target_prompt(previous, unique, prompts, self.messages)
        )
        rec = replace(
            _record(plan, f"c{self.index}t{turn}", self.index, turn, message.nonce), target_prompt_tokens=length.target
        )
        tags = prompts.calibration.tags(
            conversation=self.index,
            turn=turn,
            unique_tokens=unique,
            expected_cached_tokens=_history_tokens(previous),
            prompt_slack=length.slack,
        )
        self.messages = [*self.messages, _user(message.text)]
        request = _chat(plan, rec, tags, self.messages, self.body)
        request.then = functools.partial(self.next_turn, turn=turn)
        return request


class Served(NamedTuple):
    """What the cold baseline reads of a sent turn: holding its record would hold its stream."""

    turn: int | None
    ok: bool
    prompt_tokens: int | None


def _turn_lengths(plan: CasePlan, records: list[Served]) -> list[int | None]:
    """The median prompt tokens of each turn, as the server counted them."""
    out = []
    for turn in range(1, multi_turn_spec(plan).turns + 1):
        counts = sorted(r.prompt_tokens for r in records if r.turn == turn and r.ok and r.prompt_tokens)
        out.append(counts[len(counts) // 2] if counts else None)
    return out


def _control(
    plan: CasePlan, prompts: PromptFactory, turn: int, length: int, u: int, body: JsonObject
) -> PlannedRequest:
    """A cold-baseline request: a single nonce-led message as long as the turn's median prompt."""
    prompt = prompts.build(length)
    rec = replace(_record(plan, f"cold{turn}u{u}", u, turn, prompt.nonce), index=-1, target_prompt_tokens=length)
    tags = prompts.calibration.tags(
        turn=turn, control=True, expected_cached_tokens=0, unique_tokens=prompts.unique_tokens(prompt)
    )
    return _chat(plan, rec, tags, [_user(prompt.text)], body)


def _chat(
    plan: CasePlan, rec: RequestRecord, tags: RequestTags, messages: list[JsonObject], body: JsonObject
) -> PlannedRequest:
    """The conversation in place of a one-message prompt."""
    return PlannedRequest(rec, "", plan.case.tg, plan.endpoint, {**body, "messages": messages}, tags=tags)


def _record(
    plan: CasePlan, tag: str, conversation: int, turn: int, nonce: str | None, warmup: bool = False
) -> RequestRecord:
    return RequestRecord(
        case=plan.case.label,
        run=0 if not warmup else -1,
        index=-1 if warmup else conversation * multi_turn_spec(plan).turns + turn - 1,
        warmup=warmup,
        request_id=f"benchy-{plan.salt}-{plan.index}{tag}",
        nonce=nonce,
        target_prompt_tokens=plan.case.pp,
        target_output_tokens=plan.case.tg,
    )


def _history_tokens(previous: RequestRecord | None) -> int | None:
    """What the server has prefilled of this conversation: the previous turn's prompt (its
    answer too, on a server that caches generated tokens; benchy counts only the prompt)."""
    if previous is None:
        return 0
    return previous.prompt_tokens  # None when the server sent no usage: unknown


class Length(NamedTuple):
    """A turn's prompt length as the plan asks it: the target and how far the server's count
    may miss it (records' target_prompt_tokens and prompt_slack; None: the estimate's default)."""

    target: int
    slack: int | None


def _target_prompt(
    previous: RequestRecord | None, new_tokens: int, prompts: PromptFactory, history: list[JsonObject]
) -> Length:
    """Turn 1: the template's overhead and the message. A later turn resends a history the
    server renders and counts, so its length is a window, not a fitted prompt. Its floor is
    what benchy knows: the previous prompt (the server's own count) and the new message; a
    server that cut the history (num_ctx, context shift) falls below it. Its ceiling adds what
    benchy cannot know exactly: the answer as resent, which is its text, not its generated
    tokens (reasoning the history drops is gone, a special token comes back as several), counted
    locally × the prompts' scale and doubled (a foreign vocabulary may count a model's text up
    to twice what English filler fitted), and the template's wrappers of the two new messages
    (each no more than its whole overhead: a message wrapped, the system's, the generation
    prompt). The row's target is the window's middle and its slack the half-width plus the
    message's own, so one check (evidence.prompt_length_missed) judges it as every other row:
    a cut history or added text, never the answer's re-tokenizing."""
    calibration = prompts.calibration
    if previous is None or previous.prompt_tokens is None:
        return Length(round(calibration.overhead_tokens) + new_tokens, None)
    floor = previous.prompt_tokens + new_tokens
    answer = message_text(history[-1]) if history else ""
    resent = math.ceil(tokenizer.count(answer) * calibration.scale) if answer else 0
    width = 2 * (math.ceil(max(calibration.overhead_tokens, 0.0)) + resent)
    own = calibration.prompt_slack
    if own is None:
        own = round(estimate_slack(new_tokens))
    return Length(floor + width // 2, own + width - width // 2)


def message_text(message: JsonObject) -> str:
    """The text of an assistant message the history resends: its content and kept reasoning."""
    return "".join(str(message.get(key) or "") for key in ("content", "reasoning_content"))


def _user(text: str) -> JsonObject:
    return {"role": "user", "content": text}


def answer_text(rec: RequestRecord) -> tuple[str, str]:
    """(content, reasoning) as the server streamed them, from the record's per-event text."""
    content: list[str] = []
    reasoning: list[str] = []
    pos = 0
    for size, kind in zip(rec.token_event_chars, rec.token_event_kinds):
        piece = rec.token_event_text[pos : pos + size]
        pos += size
        (content if kind == CONTENT else reasoning if kind == REASONING else content).append(piece)
    return "".join(content), "".join(reasoning)


def assistant_message(rec: RequestRecord, keep_reasoning: bool) -> JsonObject:
    """The answer as the next turn sends it back: its content; its reasoning (as
    `reasoning_content`) only when asked to keep it."""
    content, reasoning = answer_text(rec)
    message = {"role": "assistant", "content": content}
    if keep_reasoning and reasoning:
        message["reasoning_content"] = reasoning
    return message
