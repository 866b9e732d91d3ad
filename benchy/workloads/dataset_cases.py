"""The cases of --dataset FILE: which mode the flags beside it choose (workloads/dataset.py).

--dataset FILE [--tg N] [-c N]   natural: one case per -c (and --tg), each entry's own prompt
--dataset FILE --pp N …          fitted: the sweep's cases, their prompts real text cut to length
--dataset FILE --turns T …       conversations: the multi-turn cases, their messages the entries'
"""

from __future__ import annotations

import dataclasses

from benchy.workloads import dataset
from benchy.workloads.case import Case, ScenarioError
from benchy.workloads.selection import CaseSelection


def apply(
    cases: list[Case],
    path: str,
    chosen: CaseSelection,
    min_tokens: int | None = None,
    max_tokens: int | None = None,
) -> list[Case]:
    """`cases` (select_cases' answer to the other flags) with the dataset's text; a natural
    run's own cases in their place. ScenarioError (one line) for flags the mode cannot use."""
    flags = chosen.workload
    if flags.trace or flags.shared_prefix:
        what = "--trace" if flags.trace else "--shared-prefix"
        raise ScenarioError(f"--dataset cannot be combined with {what}: each brings its own prompts")
    if chosen.scenarios:
        raise ScenarioError("--dataset makes its own cases from --pp / --turns: drop --scenario")
    if min_tokens and max_tokens and min_tokens > max_tokens:
        raise ScenarioError(f"--dataset-min-tokens {min_tokens} is above --dataset-max-tokens {max_tokens}")
    data = dataset.load(path)
    spec = dataset.DatasetSpec(path, min_tokens=min_tokens, max_tokens=max_tokens, entries=len(data.entries))
    spec = dataclasses.replace(spec, images=any(e.images for e in data.entries))
    if spec.images and (flags.turns or chosen.pp):
        raise ScenarioError(
            f"dataset {path} holds images: they go with their entry's own prompt, so --dataset alone "
            "(no --pp or --turns; docs/images.md)"
        )
    if flags.turns:
        if chosen.pp or flags.first_tokens:
            raise ScenarioError("--dataset --turns sends the entries' own messages: drop --pp and --first-tokens")
        most = max(len(e.user_messages) for e in data.entries)
        if most < flags.turns:
            raise ScenarioError(
                f"dataset {path}: no conversation has {flags.turns} user turns (the longest has {most}); lower --turns"
            )
        spec = dataclasses.replace(spec, mode="conversations", turns=flags.turns)
        return [dataclasses.replace(c, dataset=spec) for c in cases]
    if chosen.pp:
        spec = dataclasses.replace(spec, mode="fitted")
        return [dataclasses.replace(c, dataset=spec) for c in cases]
    if chosen.depth or chosen.depth_mode:
        raise ScenarioError("--dataset alone sends each entry's own prompt: --depth needs --pp")
    if chosen.rate and chosen.concurrency:
        raise ScenarioError("--rate and --concurrency cannot be combined: --rate is an open loop")
    tgs = list(chosen.tg) or [0]
    if chosen.rate:
        return [Case(pp=0, tg=tg, rate=float(r), dataset=spec) for tg in tgs for r in chosen.rate]
    return [Case(pp=0, tg=tg, concurrency=c, dataset=spec) for tg in tgs for c in (list(chosen.concurrency) or [1])]
