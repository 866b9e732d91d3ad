"""The load generator: sends a case's requests, keeping exactly N in flight (closed loop).

Prompts are built before the first request of a case is sent, so tokenizing an 8k-token prompt
never delays a send. Warmups go first, are recorded (marked `warmup`) and never counted.
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Callable

from benchy.client import Client
from benchy.prompts import Prompt, PromptFactory
from benchy.records import RequestRecord
from benchy.scenario import Case


@dataclass(frozen=True)
class CasePlan:
    """A case with everything the load generator needs to send it."""
    case: Case
    index: int
    runs: int
    warmup: int
    endpoint: str
    salt: str

    @property
    def measured(self) -> int:
        return self.runs * self.case.concurrency


@dataclass(frozen=True)
class _Send:
    record: RequestRecord
    prompt: Prompt


def exact_length_options(tg: int) -> dict:
    """Ask for exactly tg tokens: servers differ in which of these they honour."""
    return {"ignore_eos": True, "min_tokens": tg}


def _sends(plan: CasePlan, prompts: PromptFactory) -> tuple[list[_Send], list[_Send]]:
    case = plan.case

    def make(i: int, warm: bool) -> _Send:
        prompt = prompts.build(case.pp)
        tag = "w" if warm else "m"
        rec = RequestRecord(case=case.label, run=-1 if warm else i // case.concurrency, index=i,
                            warmup=warm, request_id=f"benchy-{plan.salt}-{plan.index}{tag}{i}",
                            nonce=prompt.nonce, target_prompt_tokens=case.pp, target_output_tokens=case.tg)
        return _Send(rec, prompt)

    return [make(i, True) for i in range(plan.warmup)], [make(i, False) for i in range(plan.measured)]


async def run_case(client: Client, plan: CasePlan, prompts: PromptFactory,
                   on_record: Callable[[RequestRecord], None]) -> None:
    warmups, measured = _sends(plan, prompts)
    extra = exact_length_options(plan.case.tg)
    await _closed_loop(client, plan, warmups, extra, on_record)
    await _closed_loop(client, plan, measured, extra, on_record)


async def _closed_loop(client: Client, plan: CasePlan, sends: list[_Send], extra: dict,
                       on_record: Callable[[RequestRecord], None]) -> None:
    """N workers, each sending its next request the moment its last one ends."""
    queue = iter(sends)

    async def worker() -> None:
        for send in queue:
            await client.stream(send.record, send.prompt.text, plan.case.tg, plan.endpoint, extra)
            on_record(send.record)

    workers = min(plan.case.concurrency, len(sends))
    await asyncio.gather(*(worker() for _ in range(workers)))
