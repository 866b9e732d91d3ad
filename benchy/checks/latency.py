"""A fixed latency in front of the engine (results/latency.py finds it; results/build.py
withholds the TTFT-based prefill rate): one warning per sweep family, with the fixed part, the
engine's own prefill rate and the response headers' time."""

from __future__ import annotations

from collections.abc import Iterable

from benchy.checks.registry import WARNING, Code, Warning_
from benchy.results import latency
from benchy.results.types import CheckWarning, Evidence
from benchy.results.verdicts.details import FixedLatency
from benchy.results.view import RunView

FIXED_HINT = (
    "Something holds each request before the engine sees it: a gateway's guardrails, an API "
    "manager, a content filter or a long network path. TTFT is what a user waits; for the "
    "engine's prefill speed benchmark it directly, or read the engine rate given here."
)
UNSURE_HINT = " To tell a hold from the server's own work on the prompt, add a second --pp (four times the first)."
# llama-server with default flags copies a slot's prompt cache to host RAM (--cache-ram) before it
# answers, outside its timings' prompt_ms: at one prompt length that looks like a hold in front.
LLAMACPP_COPY = "llama.cpp's own host-RAM prompt cache copy (--cache-ram, on by default; outside its prompt_ms)"
LLAMACPP_HINT = (
    "TTFT is what a user waits. To tell llama.cpp's cache copy from a hold in front of it, run once with "
    "--cache-ram 0 on the server (a hold stays, the copy goes) or add a second --pp (four times the first: "
    "the copy grows with the prompt, a hold stays put); for the engine's prefill speed read the rate given here."
)


def served_by_llamacpp(run: RunView) -> bool:
    """The server is llama.cpp by its identity (server/identity.py says how it knows)."""
    ident = run.setup.server
    return ident is not None and ident.llamacpp


def fixed_latency(run: RunView) -> Iterable[CheckWarning]:
    for found in latency.found_in(run):
        part = found.part
        engine = (
            f" The engine prefills at {part.engine_prefill_tps:,.0f} t/s (the longest prompt's tokens over "
            "its TTFT less the fixed part)."
            if part.engine_prefill_tps
            else ""
        )
        witnesses = [f"the response headers came at {part.headers_s * 1000:,.0f} ms"] if part.headers_s else []
        if part.intercept_s is not None:
            witnesses.append(f"TTFT against prompt length meets zero tokens at {part.intercept_s * 1000:,.0f} ms")
        ms = f"{part.fixed_s * 1000:,.0f} ms"
        held = f"({part.evidence()}, over {', '.join(part.cases)}; {' and '.join(witnesses)})"
        withheld = f" Prefill t/s from TTFT is withheld.{engine}"
        llamacpp = part.unsure_cause and served_by_llamacpp(run)
        if llamacpp:
            cause = f"{LLAMACPP_COPY} or a hold in front of the server; one prompt length cannot tell which."
        elif part.unsure_cause:
            cause = (
                "a hold in front of the engine or the server's own work on the prompt before it answers; one "
                "prompt length cannot tell which (a hold stays put as the prompt grows, prompt work grows with it)."
            )
        if part.unsure_cause:
            words = f"TTFT holds {ms} before the server answers {held}: {cause}{withheld}"
        else:
            words = (
                f"TTFT holds a fixed {ms} that no prompt length explains {held}: it passes before the engine "
                f"takes the request, not prefilling.{withheld}"
            )
        yield Warning_(
            Code.FIXED_LATENCY,
            WARNING,
            None,
            words,
            LLAMACPP_HINT if llamacpp else FIXED_HINT + (UNSURE_HINT if part.unsure_cause else ""),
            details=FixedLatency(
                fixed_s=part.fixed_s,
                engine_prefill_tps=part.engine_prefill_tps,
                headers_s_median=part.headers_s,
                cases=list(part.cases),
            ),
            evidence=(Evidence("fixed_s", part.fixed_s, part.threshold_s, "s"),),
        )


RUN_CHECKS = (fixed_latency,)
