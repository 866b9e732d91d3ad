"""Sending a dataset's text (--dataset, workloads/dataset.py) through the load generator.

DatasetPrompts is a PromptFactory whose text is the dataset's: in a fitted sweep each body is
real text cut to the length the sweep asks, from a start entry drawn for that request: cut
before the case by the run's exact length source (dataset_fit.prepare), else by benchy's o200k
count with the text's own calibration (calibrate_text), each (start, length) once; in a
conversation each user message is an entry's own. The nonce still leads every prompt and message (unless --no-nonce), so no cache
holds any of it before it is sent; a newline parts it from the text.

run_natural sends a natural case: the sampled entries' prompts as they are, each with its own
output length (its reference answer's, as the server would count it, or --tg), in a closed
loop of -c streams. A natural prompt (and a conversation's message) asks for no length: its
record's target is 0, as for any prompt whose length is its text's, so benchy's estimate of
real text on another vocabulary is never taken for a server that truncates. Entries whose prompt and answer cannot fit the server's context are
skipped and counted (setup.dataset), never sent.
"""

from __future__ import annotations

import dataclasses
import hashlib
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from benchy.jsontypes import JsonObject
from benchy.load import arrivals, dataset_fit, images
from benchy.load.plan import CaseIO, CasePlan, PlannedRequest, planned, request_options
from benchy.load.prompts import Calibration, Prompt, PromptFactory, Template
from benchy.load.send import Closed, Open, send
from benchy.measure import tokenizer
from benchy.measure.evidence import LENGTHS_O200K as O200K_CALIBRATED
from benchy.records import RequestRecord
from benchy.workloads import dataset
from benchy.workloads.case import Case
from benchy.workloads.dataset import DatasetSetup, DatasetSpec, Entry, Selection

if TYPE_CHECKING:
    from benchy.client.client import Client

NONCE_SEPARATOR = dataset_fit.NONCE_SEPARATOR
DEFAULT_TG = 128  # an entry with no reference answer, without --tg: the sweep's default


class DatasetPrompts(PromptFactory):
    """The run's PromptFactory (same calibration, nonce and salt), its text the dataset's."""

    def __init__(
        self,
        base: PromptFactory,
        spec: DatasetSpec,
        seed: int,
        concurrency: int = 1,
        tg: int = 0,
        count: Callable[[str], int] = tokenizer.count,
    ) -> None:
        calibration = base.calibration
        if spec.bodies is None and spec.text_fit is not None:
            # the o200k estimate, with the text's own scale (every length here is of real
            # text): no exact words, so no request is held to the exact slack
            lengths = calibration.length_source.estimated()
            calibration = dataclasses.replace(
                calibration, overhead_tokens=spec.text_fit[0], scale=spec.text_fit[1], lengths=lengths
            )
        super().__init__(calibration, nonce=base.nonce, salt=base.salt)
        self.spec, self.seed, self.count = spec, seed, count
        self.entries = list(dataset.load(spec.path).entries)
        self._texts = [e.prompt for e in self.entries]  # a fitted prompt's text, entry after entry
        self._counted: dict[int, int] = {}  # each text's count, once
        # a fitted body starts at one of these entries (by its length): the exact table's, else
        # a seeded pool, so 10,000 prompts cost a cut per (start, length), not one each
        self._pool = dataset_fit.start_pool(len(self.entries), seed)
        self._starts: dict[int, list[int]] = {}
        for start, tokens in sorted(spec.bodies or {}):
            self._starts.setdefault(tokens, []).append(start)
        self._cuts: dict[tuple[int, int], str] = dict(spec.bodies or {})
        self._conversations: list[Entry] | None = None
        self._concurrency, self._tg = concurrency, tg

    @classmethod
    def of(cls, base: PromptFactory, plan: CasePlan) -> DatasetPrompts:
        assert plan.case.dataset is not None
        return cls(base, plan.case.dataset, plan.seed, plan.case.concurrency, plan.case.tg)

    def server_tokens(self, text: str) -> int:
        """A prompt's tokens as the server will count them: the calibrated local count, the
        nonce and the chat template included."""
        nonce = 8 + 1 if self.nonce else 0  # eight one-token words and the newline
        return round(self.calibration.overhead_tokens + self.calibration.scale * (self.count(text) + nonce))

    def output_tokens(self, entry: Entry, tg: int) -> int:
        """--tg, else the reference answer's tokens as the server would count them."""
        if tg:
            return tg
        if entry.answer is None:
            return DEFAULT_TG
        return max(1, round(self.count(entry.answer) * self.calibration.text_scale))

    def selection(self, n: int, tg: int, seed: int | None = None) -> Selection:
        """The case's seeded draw. What must fit the context: a natural entry's prompt and its
        output; a conversation's first message and everything its later turns add (their
        messages and an answer of `tg` tokens a turn), since its last turn resends them all."""
        seed = self.seed if seed is None else seed
        if self.spec.mode != "conversations":
            return dataset.select(self.spec, n, seed, self.server_tokens, lambda e: self.output_tokens(e, tg))
        turns = self.spec.turns or 1

        def rest(entry: Entry) -> int:
            later = entry.user_messages[1:turns]
            return sum(self.server_tokens(m) - round(self.calibration.overhead_tokens) for m in later) + turns * tg

        return dataset.select(self.spec, n, seed, self.server_tokens, rest)

    def natural(self, entry: Entry) -> Prompt:
        """An entry's prompt as it is, led by this request's nonce."""
        return self._led(entry.prompt)

    def turn(self, conversation: int, turn: int) -> Prompt:
        """Turn `turn` (from 1) of conversation `conversation`: that sampled entry's user message."""
        if self._conversations is None:
            self._conversations = self.selection(self._concurrency, self._tg).entries
        entry = self._conversations[conversation % len(self._conversations)]
        return self._led(entry.user_messages[turn - 1])

    def unique_tokens(self, prompt: Prompt) -> int:
        """Real text: its tokens.floor, not its o200k count × a scale (the filler's, or a fit
        over other text): the server's vocabulary may give this text fewer, and the surplus
        would show the template head a cache rightly serves as leakage (issue 51, llama.cpp)."""
        if prompt.unique_local_tokens not in (None, prompt.local_tokens):  # after a shared context
            return super().unique_tokens(prompt)
        return tokenizer.floor(prompt.text)

    def _led(self, text: str) -> Prompt:
        nonce = self.next_nonce() if self.nonce else None
        full = (nonce + NONCE_SEPARATOR if nonce else "") + text
        return Prompt(text=full, nonce=nonce, local_tokens=self.count(full))

    def _body(self, tokens: int) -> str:
        """Real text of `tokens` local tokens after the nonce: from an entry drawn for this
        request (the same one for every request under --no-nonce, as the filler is)."""
        key = self._counter if self.nonce else 0
        digest = hashlib.blake2b(f"{self.seed}/{key}".encode(), digest_size=8).digest()
        starts = self._starts.get(tokens, self._pool)
        start = starts[int.from_bytes(digest, "big") % len(starts)]
        if (start, tokens) not in self._cuts:  # the estimate's cut, made once
            self._cuts[start, tokens] = dataset.cut_entries(
                self._texts, start, tokens, self.count, head=NONCE_SEPARATOR, counted=self._counted
            )
        return NONCE_SEPARATOR + self._cuts[start, tokens]


def with_dataset(plan: CasePlan, prompts: PromptFactory) -> PromptFactory:
    """The case's prompt maker: the dataset's, for a case that has one."""
    if plan.case.dataset is None or isinstance(prompts, DatasetPrompts):
        return prompts
    return DatasetPrompts.of(prompts, plan)


TEXT_CALIBRATION_LOCAL_TOKENS = (512, 1024)  # two prompts of dataset text, from different entries


async def calibrate_text(
    client: Client, endpoint: str, calibration: Calibration, cases: list[Case], salt: str, template: Template
) -> tuple[float, float] | None:
    """(overhead, scale) of the dataset's own text on this server: a server's tokenizer splits
    real text otherwise than the filler (a small vocabulary: twice as many tokens for the same
    o200k count), and every length a dataset case estimates or cuts is of real text. The chat
    template's overhead is the text's whatever the text, so the filler's fit keeps it; the
    scale is read from two long prompts of the dataset (from different entries, each led by
    its nonce): a short one would put each text's own density into the overhead. The run's
    calibration stays the filler's (contexts, warmups); None without a dataset."""
    spec = next((c.dataset for c in cases if c.dataset is not None), None)
    if spec is None:
        return None
    maker = DatasetPrompts(PromptFactory(calibration, salt=f"{salt}dcal{endpoint}"), spec, seed=0)
    local = server = 0
    for tokens in TEXT_CALIBRATION_LOCAL_TOKENS:
        nonce = maker.next_nonce()
        text = nonce + maker._body(tokens - maker.count(nonce))
        usage = await client.usage_of(template.render(text, endpoint), endpoint, template.request_options(endpoint))
        local += maker.count(text)
        server += usage["prompt_tokens"]
    scale = (server - len(TEXT_CALIBRATION_LOCAL_TOKENS) * calibration.overhead_tokens) / local
    if scale <= 0:
        return None  # a server count that makes no sense: the filler's calibration stands
    return calibration.overhead_tokens, scale


def bind(
    case: Case,
    context: int | None,
    text_fit: tuple[float, float] | None,
    fitted: dataset_fit.FittedBodies | None = None,
) -> Case:
    """The case with what the server showed in its dataset spec: its context (entries that
    cannot fit it are skipped), the text's calibration, and a fitted case's bodies cut by an
    exact source (dataset_fit.prepare); a case without a dataset as it is."""
    if case.dataset is None:
        return case
    spec = dataclasses.replace(case.dataset, context=context, text_fit=text_fit)
    if fitted is not None:
        spec = dataclasses.replace(spec, bodies=fitted.bodies, lengths=fitted.method)
    return dataclasses.replace(case, dataset=spec)


async def run_natural(plan: CasePlan, case_io: CaseIO) -> None:
    """Warmups (entries of their own draw), then this worker's share of the sampled entries,
    each with its own output length: -c at a time, or at --rate's seeded Poisson times (the
    same schedule in every worker, as the load generator's)."""
    prompts = with_dataset(plan, case_io.prompts)
    assert isinstance(prompts, DatasetPrompts)
    chosen = prompts.selection(plan.measured, plan.case.tg)
    warm = prompts.selection(plan.warmup, plan.case.tg, seed=plan.seed + 1).entries if plan.warmup else []
    bodies: dict[int, JsonObject] = {}
    rate = plan.case.rate
    offsets = arrivals.arrival_offsets(len(chosen.entries), rate, plan.seed + plan.index) if rate else None

    def make(i: int, entry: Entry, warmup: bool) -> PlannedRequest:
        prompt = prompts.natural(entry)
        tg = prompts.output_tokens(entry, plan.case.tg)
        rec = RequestRecord(
            case=plan.case.label,
            run=-1 if warmup else i // max(1, plan.case.concurrency),
            index=i,
            warmup=warmup,
            request_id=f"benchy-{plan.salt}-{plan.index}{'w' if warmup else 'n'}{i}",
            nonce=prompt.nonce,
            target_prompt_tokens=0,  # none asked: the entry's own length, as the server counts it
            target_output_tokens=tg,
        )
        tags, body = prompts.calibration.tags(), bodies.setdefault(tg, request_options(plan, tg))
        if entry.images:  # a ShareGPT-4V / LLaVA entry's pictures, as they are
            tags, body = images.with_files(entry.images, tags, body)
        return planned(plan, rec, prompt, tg, body, None if warmup or offsets is None else offsets[i], tags)

    def measured() -> Iterator[PlannedRequest]:
        for i in arrivals.share(len(chosen.entries), plan.worker, plan.workers):
            yield make(i, chosen.entries[i], False)

    warmups = [
        make(i, e, True) for i, e in enumerate(warm) if i in arrivals.share(len(warm), plan.worker, plan.workers)
    ]
    await send(case_io.client, warmups, case_io.on_record, Closed(plan.streams), on_sent=case_io.on_sent)
    await case_io.client.warm(plan.inflight_cap or plan.streams)
    start_s = await case_io.start() if case_io.start else time.perf_counter()
    deadline = arrivals.duration_deadline(start_s, plan.duration_s)
    pace = (
        Open(start_s, plan.inflight_cap, deadline, plan.drain_window)
        if rate
        else Closed(plan.streams, deadline, plan.drain_window)
    )
    await send(case_io.client, measured(), case_io.on_record, pace, on_sent=case_io.on_sent)


def setup(plans: list[CasePlan], calibrations: dict[str, Calibration], nonce: bool) -> DatasetSetup | None:
    """results.json's setup.dataset: the file (name, sha256, format, entries), the mode and its
    filters, and per case what its sampling sent and left out (the same seeded draw the case
    makes); None for a run without one."""
    with_data = [p for p in plans if p.case.dataset is not None]
    if not with_data:
        return None
    spec: DatasetSpec = with_data[0].case.dataset  # type: ignore[assignment]
    data = dataset.load(spec.path)
    sampling, lengths = {}, {}
    for plan in with_data:
        prompts = DatasetPrompts.of(PromptFactory(calibrations[plan.endpoint], nonce=nonce), plan)
        if spec.mode == "natural":
            sampling[plan.case.label] = prompts.selection(plan.measured, plan.case.tg).sampling()
        elif spec.mode == "conversations":
            sampling[plan.case.label] = prompts.selection(plan.case.concurrency, plan.case.tg).sampling()
        else:  # fitted: cut by an exact source, or the o200k estimate
            lengths[plan.case.label] = plan.case.dataset.lengths or O200K_CALIBRATED  # type: ignore[union-attr]
    return DatasetSetup(
        name=spec.name,
        path=spec.path,
        sha256=data.sha256,
        format=data.format,
        entries=len(data.entries),
        entries_without_prompt=data.skipped_empty,
        mode=spec.mode,
        seed=with_data[0].seed,
        min_tokens=spec.min_tokens,
        max_tokens=spec.max_tokens,
        context=spec.context,
        text_overhead_tokens=round(spec.text_fit[0], 2) if spec.text_fit else None,
        text_scale=round(spec.text_fit[1], 5) if spec.text_fit else None,
        sampling=sampling,
        lengths=lengths,
    )
