"""Multi-turn conversations: each turn resends the whole history, as chat and agent clients do.

U conversations (the case's concurrency) run at once, each a dependent loop: turn k sends the
earlier user messages and the server's own answers (as it streamed them) plus a new user
message of the case's pp tokens, waits for the whole answer (tg tokens), pauses a think time
(fixed or seeded exponential/lognormal), then sends turn k+1. Reasoning of earlier turns is
dropped from the history, as gpt-oss's chat format does (`keep_reasoning` sends it back as
`reasoning_content`).

Each new user message is led by its own nonce, so a cache can hold the history and nothing of
the new message. A turn's record says what an ideal cache would serve it
(`expected_cached_tokens`: the previous turn's prompt, as the server counted it, which the
server has prefilled already) and how many tokens at its end are new (`unique_tokens`): a
server reporting less than expected has evicted the history, more than prompt − unique has
leaked something across conversations (or the nonce is broken). A failed turn ends its
conversation: its record is kept and counted, the turns after it are not sent.

`cold_baseline`: once the conversations are over, each turn index is sent again as U requests
at once (the same concurrency) of a single nonce-led message as long as that turn's median
prompt, so nothing is shared: the TTFT of the same lengths with nothing cached, which the
turn's TTFT is set against (records marked `control`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence

from benchy.client.stream import Client
from benchy.load.plan import CaseIO, CasePlan, multi_turn_spec, request_options
from benchy.load.prompts import PromptError, PromptFactory
from benchy.measure.records import CONTENT, REASONING, RequestRecord


async def run_conversations(plan: CasePlan, case_io: CaseIO) -> None:
    """Warmups (one-message conversations, not counted), then every conversation at once."""
    client, prompts, on_record, start = case_io.client, case_io.prompts, case_io.on_record, case_io.start
    if plan.endpoint != "chat":
        raise PromptError("a multi-turn case needs --endpoint chat: the server's chat template renders the history")
    spec = multi_turn_spec(plan)
    extra = request_options(plan, plan.case.tg)
    for i in range(plan.warmup):
        message = prompts.message(spec.first_tokens or plan.case.pp)
        rec = _record(plan, f"w{i}", -1, i, message.nonce, warmup=True)
        rec.local_token_scale = prompts.calibration.text_scale
        await _send(client, plan, rec, [_user(message.text)], extra)
        on_record(rec)
    start_s = await start() if start else time.perf_counter()
    deadline = start_s + plan.duration_s if plan.duration_s is not None else float("inf")
    sent: list[RequestRecord] = []  # every turn's record, for the cold baseline's lengths

    def keep(rec: RequestRecord) -> None:
        sent.append(rec)
        on_record(rec)

    tasks = [
        asyncio.ensure_future(_conversation(client, plan, prompts, c, extra, keep, deadline))
        for c in range(plan.case.concurrency)
    ]
    await _all(tasks)
    if spec.cold_baseline:
        await _cold_baseline(client, plan, prompts, extra, on_record, sent, deadline)


async def _all(tasks: Sequence[asyncio.Future]) -> None:
    try:
        await asyncio.gather(*tasks)
    finally:
        # A task that raised (a stop on too many errors) ends the others.
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def _cold_baseline(
    client: Client,
    plan: CasePlan,
    prompts: PromptFactory,
    extra: dict,
    on_record: Callable[[RequestRecord], None],
    sent: list[RequestRecord],
    deadline: float,
) -> None:
    """Each turn's median prompt length again, U requests at once, nothing shared."""
    for turn, length in enumerate(_turn_lengths(plan, sent), 1):
        if length is None or time.perf_counter() >= deadline:
            continue
        tasks = [
            asyncio.ensure_future(_control(client, plan, prompts, turn, length, u, extra, on_record))
            for u in range(plan.case.concurrency)
        ]
        await _all(tasks)


def _turn_lengths(plan: CasePlan, records: list[RequestRecord]) -> list[int | None]:
    """The median prompt tokens of each turn, as the server counted them."""
    out = []
    for turn in range(1, multi_turn_spec(plan).turns + 1):
        counts = sorted(r.prompt_tokens for r in records if r.turn == turn and r.ok and r.prompt_tokens)
        out.append(counts[len(counts) // 2] if counts else None)
    return out


async def _control(
    client: Client,
    plan: CasePlan,
    prompts: PromptFactory,
    turn: int,
    length: int,
    u: int,
    extra: dict,
    on_record: Callable[[RequestRecord], None],
) -> None:
    prompt = prompts.build(length)
    rec = _record(plan, f"cold{turn}u{u}", u, turn, prompt.nonce)
    rec.conversation, rec.control, rec.index = None, True, -1
    rec.local_token_scale = prompts.calibration.text_scale
    rec.target_prompt_tokens, rec.expected_cached_tokens = length, 0
    rec.unique_tokens = round((prompt.unique_local_tokens or prompt.local_tokens) * prompts.calibration.scale)
    await _send(client, plan, rec, [_user(prompt.text)], extra)
    on_record(rec)


async def _conversation(
    client: Client,
    plan: CasePlan,
    prompts: PromptFactory,
    conversation: int,
    extra: dict,
    on_record: Callable[[RequestRecord], None],
    deadline: float,
) -> None:
    spec = multi_turn_spec(plan)
    pauses = spec.think.draws(plan.seed * 100_003 + plan.index * 1_009 + conversation)
    history: list[dict] = []
    previous: RequestRecord | None = None
    for turn in range(1, spec.turns + 1):
        if time.perf_counter() >= deadline:
            return
        tokens = spec.first_tokens if turn == 1 and spec.first_tokens else plan.case.pp
        message = prompts.message(tokens)
        rec = _record(plan, f"c{conversation}t{turn}", conversation, turn, message.nonce)
        rec.local_token_scale = prompts.calibration.text_scale
        rec.unique_tokens = round(message.local_tokens * prompts.calibration.scale)
        rec.expected_cached_tokens = _history_tokens(previous)
        rec.target_prompt_tokens = _target_prompt(previous, rec.unique_tokens, prompts)
        messages = [*history, _user(message.text)]
        await _send(client, plan, rec, messages, extra)
        on_record(rec)
        if not rec.ok:
            return  # the history has no answer to go on with: this conversation ends here
        history = [*messages, assistant_message(rec, spec.keep_reasoning)]
        previous = rec
        if turn < spec.turns:
            await asyncio.sleep(next(pauses))


async def _send(client: Client, plan: CasePlan, rec: RequestRecord, messages: list[dict], extra: dict) -> None:
    body = {**extra, "messages": messages}  # the conversation in place of a one-message prompt
    await client.stream(rec, "", plan.case.tg, "chat", body)


def _record(plan: CasePlan, tag: str, conversation: int, turn: int, nonce: str | None, warmup=False) -> RequestRecord:
    return RequestRecord(
        case=plan.case.label,
        run=0 if not warmup else -1,
        index=-1 if warmup else conversation * multi_turn_spec(plan).turns + turn - 1,
        warmup=warmup,
        request_id=f"benchy-{plan.salt}-{plan.index}{tag}",
        nonce=nonce,
        target_prompt_tokens=plan.case.pp,
        target_output_tokens=plan.case.tg,
        conversation=None if warmup else conversation,
        turn=None if warmup else turn,
    )


def _history_tokens(previous: RequestRecord | None) -> int | None:
    """What the server has prefilled of this conversation: the previous turn's prompt (its
    answer too, on a server that caches generated tokens; benchy counts only the prompt)."""
    if previous is None:
        return 0
    return previous.prompt_tokens  # None when the server sent no usage: unknown


def _target_prompt(previous: RequestRecord | None, new_tokens: int, prompts: PromptFactory) -> int:
    if previous is None or previous.prompt_tokens is None:
        return round(prompts.calibration.overhead) + new_tokens
    return previous.prompt_tokens + (previous.completion_tokens or 0) + new_tokens


def _user(text: str) -> dict:
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


def assistant_message(rec: RequestRecord, keep_reasoning: bool) -> dict:
    """The answer as the next turn sends it back: its content; its reasoning (as
    `reasoning_content`) only when asked to keep it."""
    content, reasoning = answer_text(rec)
    message = {"role": "assistant", "content": content}
    if keep_reasoning and reasoning:
        message["reasoning_content"] = reasoning
    return message
