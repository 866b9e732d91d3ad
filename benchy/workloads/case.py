"""A case: one (prompt length × output length × load × depth) combination, or one workload's run.

Cases are made by scenario.py (flags and scenario files) and cases.py (workloads), and are the
unit every later stage reports by; the case's label is llama-bench's (`pp512 tg32 @ d4096`).
"""

from __future__ import annotations

import dataclasses
import functools
import json
from dataclasses import dataclass
from typing import Any

from benchy.jsontypes import JsonObject
from benchy.workloads.dataset import DatasetSpec
from benchy.workloads.spec import MultiTurn, SharedPrefix, TraceReplay, Workload

ENDPOINTS = ("chat", "completions", "responses", "messages", "embeddings", "rerank")
POOLING_ENDPOINTS = ("embeddings", "rerank")  # they read inputs and generate no token (docs/embeddings.md)
DEPTH_MODES = ("cold", "cached")


class ScenarioError(ValueError):
    """Bad scenario input; the message is one line, fit for the user."""


@dataclass(frozen=True)
class Case:
    pp: int
    tg: int
    concurrency: int = 1
    depth: int = 0
    scenario: str | None = None
    runs: int | None = None  # None: the run's --runs
    endpoint: str | None = None  # None: the run's --endpoint
    depth_mode: str = "cold"  # "cold" | "cached" (see the module docstring)
    rate: float | None = None  # requests/s, open loop (Poisson arrivals); None: closed loop
    # A cache-aware workload (benchy/workloads): multi-turn, shared prefix or trace replay;
    # None for a plain sweep case.
    workload: Workload | None = None
    # A scenario's `extra_body` table, as canonical JSON (a Case stays hashable): fields merged
    # into each of its requests' bodies (the run's --extra-body goes over them).
    extra_body: str | None = None
    stream: bool = True  # a scenario's `stream = false`: whole answers (client/whole.py), as --no-stream

    # --dataset: real text (workloads/dataset.py): a natural case of its own, or the text of a
    # sweep (fitted) or of a multi-turn case's messages (conversations)
    dataset: DatasetSpec | None = None
    # --pp-stddev / --tg-stddev: each request's lengths drawn around pp and tg (workloads/spread.py)
    pp_stddev: float = 0.0
    tg_stddev: float = 0.0
    batch: int = 1  # --batch: inputs a request of a pooling endpoint (with_endpoint sets it)

    def extra_fields(self) -> JsonObject:
        return _fields(self.extra_body) if self.extra_body else {}

    @property
    def kind(self) -> str:
        """ "sweep", "dataset" (--dataset alone), or the workload's kind: "multi_turn",
        "shared_prefix", "trace"."""
        if self.dataset is not None and self.dataset.mode == "natural":
            return "dataset"
        return self.workload.kind if self.workload is not None else "sweep"

    @property
    def pooling(self) -> bool:
        """Sent to a pooling endpoint: no output, so no tg; --batch inputs a request."""
        return self.endpoint in POOLING_ENDPOINTS

    @property
    def groups(self) -> int:
        """Shared contexts sent ahead: one per group of a shared-prefix case, else one."""
        return self.workload.groups if isinstance(self.workload, SharedPrefix) else 1

    @property
    def label(self) -> str:
        """llama-bench style: `pp512 tg32`, `pp512 tg32 c4`, `pp512 tg32 @ d4096`; a rate case
        reads `pp512 tg32 r4` (4 requests/s); a cached-context case `… @ d4096 cached`.
        Workloads: `multi-turn u4 x8 pp256 tg64`, `shared 75% of pp2048 g4 tg32 c4`,
        `trace sample.jsonl x2`. A dataset's name follows in brackets (`pp512 tg32 [chat.jsonl]`);
        its natural case reads `dataset chat.jsonl c4` (`… tg128 c4` with --tg, `… r4` with --rate).
        An endpoint other than chat (the default) ends it: `pp512 tg32 c4 completions`; a pooling
        endpoint generates nothing, so its batch stands where tg would: `pp512 b2 c4 embeddings`."""
        return self._shape_label + endpoint_suffix(self.endpoint)

    @property
    def _shape_label(self) -> str:
        if self.dataset is not None:
            return self._dataset_label(self.dataset)
        if isinstance(self.workload, TraceReplay):
            return self.workload.label()
        if isinstance(self.workload, SharedPrefix):
            return self.workload.label(self.depth + self.pp, self.tg, self.concurrency)
        if isinstance(self.workload, MultiTurn):
            return self.workload.label(self.pp, self.tg, self.concurrency)
        text = f"pp{self.pp}{_spread(self.pp_stddev)} " + (
            f"b{self.batch}" if self.pooling else f"tg{self.tg}{_spread(self.tg_stddev)}"
        )
        if self.rate is not None:
            text += f" r{self.rate:g}"
        elif self.concurrency != 1:
            text += f" c{self.concurrency}"
        if self.depth:
            text += f" @ d{self.depth}"
            if self.depth_mode == "cached":
                text += " cached"  # distinct from a cold case of the same sizes
        return text

    def _dataset_label(self, dataset: DatasetSpec) -> str:
        if dataset.mode == "natural":
            tg = f" tg{self.tg}" if self.tg else ""
            if self.rate is not None:
                return f"dataset {dataset.name}{tg} r{self.rate:g}"
            return f"dataset {dataset.name}{tg}" + (f" c{self.concurrency}" if self.concurrency != 1 else "")
        if dataset.mode == "conversations" and isinstance(self.workload, MultiTurn):
            return f"multi-turn u{self.concurrency} x{self.workload.turns} tg{self.tg} [{dataset.name}]"
        return f"{dataclasses.replace(self, dataset=None)._shape_label} [{dataset.name}]"


DEFAULT_ENDPOINT = "chat"  # a label names its endpoint only when it is another


def endpoint_suffix(endpoint: str | None) -> str:
    """` completions` for a case sent elsewhere than chat: two runs, or a scenario's cases, over
    different APIs do not share a label (compare pairs them by shape: report/compare.py)."""
    return f" {endpoint}" if endpoint and endpoint != DEFAULT_ENDPOINT else ""


def with_endpoint(cases: list[Case], endpoint: str, batch: int = 1) -> list[Case]:
    """Each case with the endpoint it is sent to (its own, else the run's --endpoint), so that its
    label says which, and a pooling case with its --batch, which its label shows in tg's place;
    cases that now read alike are one (once_each: --tg does not part pooling cases)."""
    resolved = [c if c.endpoint else dataclasses.replace(c, endpoint=endpoint) for c in cases]
    resolved = [dataclasses.replace(c, batch=batch) if c.pooling else c for c in resolved]
    return once_each(resolved)[0]


def _spread(stddev: float) -> str:
    """A length's spread in a label (`pp512±64`), so a varied case never shares a fixed one's."""
    return f"±{stddev:g}" if stddev else ""


@functools.lru_cache(maxsize=64)
def _fields(text: str) -> JsonObject:
    fields: dict[str, Any] = json.loads(text)
    return fields


def once_each(cases: list[Case]) -> tuple[list[Case], list[str]]:
    """The cases with each label once, and the labels that were asked for more than once.

    The table, results.json, compare and the report know a case by its label: a case asked for
    twice (`--pp 512 512`, or a scenario's case asked again by flags) would stand there twice
    under one name, so it is measured once (more requests: --runs). Two cases that share a label
    but would be measured differently (another endpoint, runs, body) are a ScenarioError."""
    kept: dict[str, Case] = {}
    repeated: list[str] = []
    for case in cases:
        first = kept.setdefault(case.label, case)
        if first is case:
            continue
        same = ("scenario", "tg", "tg_stddev") if case.pooling else ("scenario",)  # a pooling tg means nothing
        differ = [
            f.name
            for f in dataclasses.fields(Case)
            if f.name not in same and getattr(first, f.name) != getattr(case, f.name)
        ]
        if differ:
            raise ScenarioError(
                f"two cases are labelled {case.label!r} but differ in {', '.join(differ)}: "
                "a run knows its cases by label; ask for one of them"
            )
        repeated += [] if case.label in repeated else [case.label]
    return list(kept.values()), repeated
