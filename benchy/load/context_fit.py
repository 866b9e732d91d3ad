"""Which cases fit the server's context: decided from the server's facts before anything is sent.

Why here, in load/: a case whose prompt (depth + pp, or a trace's own lengths) fills the context
the server reported would get an HTTP 400 a request; refusing it (or, with --skip-unfit, leaving
it out of the plan) is part of planning the load.
"""

from __future__ import annotations

from typing import Protocol

from benchy.load.agent_lengths import trace_requests
from benchy.workloads.case import Case
from benchy.workloads.spec import TraceReplay


class ServerContext(Protocol):
    """What the server said of its context (server/identity.py's ServerIdentity)."""

    @property
    def context_length(self) -> int | None: ...

    @property
    def context_source(self) -> str | None: ...


class PromptTooLong(Exception):
    """A case asks for a prompt the server's context cannot hold: a usage error, raised before
    anything is sent (the server would answer each request with an HTTP 400)."""


def unfit_cases(cases: list[Case], identity: ServerContext, requests: int | None = None) -> dict[str, str]:
    """Cases with a prompt that fills the context the server reported: label → why. A sweep
    case's prompt is depth + pp; a trace replay's are its requests' own (its first `requests`
    where --requests limits it)."""
    context = identity.context_length
    if not context:
        return {}
    unfit = {}
    for case in cases:
        prompt = case.depth + case.pp
        if case.kind == "sweep" and prompt >= context:
            depth = f" (--depth {case.depth} + --pp {case.pp})" if case.depth else ""
            unfit[case.label] = (
                f"{case.label} asks for a {prompt:,}-token prompt{depth}, but the server's context is "
                f"{context:,} tokens ({identity.context_source})"
            )
        elif isinstance(case.workload, TraceReplay):
            replayed = trace_requests(case.workload.path, case.workload.limit or requests)
            over = [r.input_tokens for r in replayed if r.input_tokens >= context]
            if over:
                unfit[case.label] = (
                    f"{case.label}: {len(over)} of its {len(replayed)} requests ask for prompts of up to "
                    f"{max(over):,} tokens, but the server's context is {context:,} tokens ({identity.context_source})"
                )
    return unfit


def refuse_too_long(
    cases: list[Case], identity: ServerContext, skip_unfit: bool = False, requests: int | None = None
) -> list[Case]:
    """The cases to run: all of them, or (--skip-unfit) those whose prompt fits the server's
    context. PromptTooLong for a case that does not fit, unless skipped; always when none fits."""
    unfit = unfit_cases(cases, identity, requests)
    fit = [c for c in cases if c.label not in unfit]
    if unfit and not (skip_unfit and fit):
        label, why = next(iter(unfit.items()))
        case = next(c for c in cases if c.label == label)
        others = " or pass --skip-unfit to run only the cases that fit" if fit else ""
        if case.kind == "trace":  # its lengths are the trace's: no flag shortens them
            raise PromptTooLong(
                f"{why}: the server would refuse each with an HTTP 400; replay the trace against a server "
                f"whose context holds its prompts{others}"
            )
        raise PromptTooLong(
            f"{why}: lower --pp/--depth so that prompt and output (--tg {case.tg}) fit in "
            f"{identity.context_length:,}{others}"
        )
    return fit
