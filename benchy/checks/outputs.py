"""Checks of what the server sent back: failed requests and their kinds (request_errors),
outputs that count as failures (empty_output, zero_tokens), outputs without an answer
(reasoning_only, Harmony's dangerous_stop and special_tokens_stripped), outputs shorter than
asked (output_length_mismatch), and a case the run stopped inside (case_cut_short).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from benchy.checks import tool_frame
from benchy.checks.check import Check
from benchy.checks.found import Share
from benchy.checks.registry import (
    ERROR,
    WARNING,
    Code,
    Warning_,
)
from benchy.measure import stats, unavailable
from benchy.measure.classify import DRAIN_CUT, OUTPUT_FAILURES
from benchy.results.pooling import is_pooling
from benchy.results.types import (
    CaseResult,
    CheckWarning,
    Evidence,
)
from benchy.results.verdicts.details import (
    CaseCutShort,
    DangerousStop,
    DangerousStopFound,
    EmptyOutput,
    OutputLengthMismatch,
    RequestCount,
    RequestErrors,
    ZeroTokens,
)
from benchy.results.view import RunView


def _failure_severity(case: CaseResult) -> str:
    """A case that lost most of its measured requests is a failed case, not a qualified one."""
    return ERROR if case.n_failed > case.n_ok else WARNING


def _measured(case: CaseResult) -> int:
    return case.n_ok + case.n_failed


@dataclass(frozen=True)
class Failures:
    """The case's failed requests by kind, the first message of each, and whether the run
    stopped because the server went away (which decides the hint)."""

    errors: dict[str, int]
    first: dict[str, str]
    server_gone: bool


class RequestErrorsCheck(Check[Failures]):
    code = Code.REQUEST_ERRORS

    def detect(self, case: CaseResult, run: RunView) -> Failures | None:
        # Empty and zero-token outputs are failures too, but have checks of their own.
        # Requests the drain cut are benchy's doing: the saturation note counts them (checks/saturation.py).
        errors = {k: v for k, v in case.errors.items() if k not in OUTPUT_FAILURES and k != DRAIN_CUT}
        if not errors:
            return None
        gone = bool(run.stopped and run.stopped.by == "server-gone")
        return Failures(errors, _first_errors(case, errors), gone)

    def words(self, case: CaseResult, found: Failures) -> CheckWarning:
        errors = found.errors
        kinds = ", ".join(f"{k}: {v}" for k, v in sorted(errors.items(), key=str))
        total = case.n_ok + case.n_failed
        return Warning_(
            Code.REQUEST_ERRORS,
            _failure_severity(case),
            case.label,
            f"{sum(errors.values())} of {total} requests failed ({kinds}); statistics cover "
            f"only the {case.n_ok} that succeeded.{_first_errors_text(found.first)}",
            _errors_hint(errors, found.server_gone, case),
            details=RequestErrors(errors=errors, first_errors=found.first),
        )


request_errors = RequestErrorsCheck()  # registered by this name (checks/warnings.py)


def _first_errors_text(first: dict[str, str]) -> str:
    """The first failure of each kind as one sentence of its own, the kinds apart by `;`."""
    if not first:
        return ""
    said = "; ".join(f"{kind}: {message.strip().rstrip('.')}" for kind, message in first.items())
    return f" The first of each kind: {said}."


def _first_errors(case: CaseResult, errors: dict[str, int]) -> dict[str, str]:
    """The first failure of each kind, in the server's own words (its HTTP error body)."""
    return {kind: message for kind, message in case.facts().first_errors.items() if kind in errors}


def _errors_hint(errors: dict[str, int], server_gone: bool, case: CaseResult) -> str:
    """What to do about the failures the case saw, by their kinds: a dead server is not fixed
    by a longer --timeout, nor a refused parameter by a lower load."""
    if any(k.startswith("http_4") and k != "http_429" for k in errors):
        lower = (  # a trace's lengths are its own: no flag of benchy's shortens them
            "Replay a trace whose lengths fit the server" if case.kind == "trace" else "Lower --pp/--depth/--tg"
        )
        return (
            "The server refused requests (its message is above): a prompt longer than its context, "
            f"or a parameter it does not take. {lower}, or fix the option."
        )
    if "connect" in errors or server_gone:
        return (
            "Connections were refused or never made: the server was down or unreachable (it may "
            "have died during the run: see its log). Restart it, check --base-url, and run again."
        )
    if errors.keys() & {"timeout", "stall"}:
        return (
            "Requests ran past --timeout or went silent past --stall-timeout: the server is "
            "overloaded or stuck. Lower the load, or raise the limit if such waits are expected."
        )
    return (
        "See each request's `error` in requests.jsonl; connections the server dropped or reset "
        "usually mean it is overloaded or restarting: lower the load."
    )


@dataclass(frozen=True)
class Empty:
    """Requests with no content: how many, the completion tokens the server claimed for them
    (median) and the `content: null` deltas they held."""

    requests: int
    claimed: int
    nulls: int


class EmptyOutputCheck(Check[Empty]):
    code = Code.EMPTY_OUTPUT

    def detect(self, case: CaseResult, run: RunView) -> Empty | None:
        bad = case.facts().failed_as["empty_output"]
        if not bad.count:
            return None
        return Empty(bad.count, int(stats.median(bad.claimed_tokens)), bad.content_null_events)

    def words(self, case: CaseResult, found: Empty) -> CheckWarning:
        return Warning_(
            Code.EMPTY_OUTPUT,
            _failure_severity(case),
            case.label,
            f"{found.requests} of {_measured(case)} requests returned no content although the server "
            f"claimed {found.claimed} completion tokens (median; {found.nulls} `content: null` deltas): "
            f"they count as failed; statistics cover only the {case.n_ok} that succeeded.",
            "A broken kernel can generate tokens and print nothing (vLLM's CUTLASS FP4 path on "
            "SM121/GB10 returns content: null; VLLM_MXFP4_BACKEND=marlin fixes it). Check one "
            "answer with curl before benchmarking.",
            details=EmptyOutput(
                requests=found.requests, claimed_tokens_median=found.claimed, content_null_events=found.nulls
            ),
        )


empty_output = EmptyOutputCheck()


@dataclass(frozen=True)
class NoTokens:
    """Requests that generated no token, and their finish_reasons (sorted)."""

    requests: int
    finish_reasons: tuple[str, ...]


class ZeroTokensCheck(Check[NoTokens]):
    code = Code.ZERO_TOKENS

    def detect(self, case: CaseResult, run: RunView) -> NoTokens | None:
        bad = case.facts().failed_as["zero_tokens"]
        return NoTokens(bad.count, tuple(sorted(bad.finish_reasons))) if bad.count else None

    def words(self, case: CaseResult, found: NoTokens) -> CheckWarning:
        return Warning_(
            Code.ZERO_TOKENS,
            _failure_severity(case),
            case.label,
            f"{found.requests} of {_measured(case)} requests generated 0 tokens (finish_reason "
            f"{', '.join(found.finish_reasons)}): they count as failed; statistics cover only the "
            f"{case.n_ok} that succeeded.",
            "The server stopped at once: a stop string or EOS token that matches immediately "
            "(e.g. <|message|> or <|end|> in a Harmony model's stop list) or a wrong chat "
            "template. Check the stop list and generation_config.",
            details=ZeroTokens(requests=found.requests, finish_reasons=list(found.finish_reasons)),
        )


zero_tokens = ZeroTokensCheck()


class ReasoningOnly(Check[Share]):
    code = Code.REASONING_ONLY

    def detect(self, case: CaseResult, run: RunView) -> Share | None:
        facts = case.facts()  # no content but reasoning, or a think block never closed
        return Share(facts.n_reasoning_only, facts.n_ok) if facts.n_reasoning_only else None

    def words(self, case: CaseResult, found: Share) -> CheckWarning:
        return Warning_(
            Code.REASONING_ONLY,
            WARNING,
            case.label,
            f"{found.requests} of {found.of} requests spent every output token on reasoning and "
            "gave no final answer: time to first content is unavailable, and the rates "
            "count reasoning tokens.",
            "Raise --tg so the model reaches its answer, or lower its reasoning effort.",
            details=RequestCount(requests=found.requests),
        )


reasoning_only = ReasoningOnly()


@dataclass(frozen=True)
class Unenforced(Share):
    """Answers without a tool call although --tool-choice `choice` asked for one; `cut`: each
    came whole and stopped at the length limit (checks/tool_frame.cut_whole)."""

    choice: str
    cut: bool


class ToolChoiceIgnored(Check[Unenforced]):
    """--tool-choice required (or a function's name) asks every answer to be a call: answers
    without one mean the server did not enforce it (llama.cpp lets text come before its first
    <tool_call>: docs/tools.md), and the time to first tool call covers only the others."""

    code = Code.TOOL_CHOICE_IGNORED

    def detect(self, case: CaseResult, run: RunView) -> Unenforced | None:
        choice, facts = run.setup.tool_choice, case.facts()
        if choice in (None, "auto", "none") or not facts.n_without_tool_call:
            return None
        cut = tool_frame.cut_whole(case) == facts.n_without_tool_call  # each whole, at the length limit
        return Unenforced(facts.n_without_tool_call, facts.n_ok, str(choice), cut)

    def words(self, case: CaseResult, found: Unenforced) -> CheckWarning:
        cut = found.cut
        return Warning_(
            Code.TOOL_CHOICE_IGNORED,
            WARNING,
            case.label,
            f"{found.requests} of {found.of} requests held no tool call although --tool-choice "
            f"{found.choice} asked for one: {CUT_WHOLE if cut else 'the server did not enforce the choice'}, so "
            "those answers are text and the time to first tool call covers only the rest.",
            ("Stream them: without --no-stream a cut call still arrives as a call. " if cut else "")
            + "Check that the server parses tool calls for this model (vLLM --enable-auto-tool-choice and a "
            "--tool-call-parser; llama.cpp --jinja and a template with tools) and that its grammar holds "
            "the call from the first token.",
            details=RequestCount(requests=found.requests),
        )


tool_choice_ignored = ToolChoiceIgnored()


# Whole answers cut at the length limit: a cut call is unparseable (checks/tool_frame.cut_whole).
CUT_WHOLE = (
    "each came whole and stopped at the length limit, so either the server did not enforce the choice "
    "or it did and could not parse a call the limit cut (vLLM's parser then returns the call's raw "
    "text as content)"
)


@dataclass(frozen=True)
class Short(Share):
    """Requests that got fewer tokens than asked, of those with usage: the tokens delivered
    (median, least, most), how the short ones finished and the --stop strings sent."""

    delivered: int
    least: int
    most: int
    finish_reasons: frozenset[Any]
    stop: tuple[str, ...]


class OutputLengthMismatchCheck(Check[Short]):
    code = Code.OUTPUT_LENGTH_MISMATCH

    def detect(self, case: CaseResult, run: RunView) -> Short | None:
        # Without usage the token count is a lower bound: it cannot show a short output.
        facts = case.facts()
        got = facts.delivered  # the believed count of each request with usage
        if not facts.n_short or is_pooling(case.endpoint):  # a pooling request generates nothing
            return None
        reasons = frozenset(facts.short_finish_reasons)
        delivered = int(stats.median(got))
        return Short(facts.n_short, len(got), delivered, min(got), max(got), reasons, tuple(run.setup.stop))

    def words(self, case: CaseResult, found: Short) -> CheckWarning:
        cause, hint = _short_output_cause(found.finish_reasons, found.stop)
        asked = f"the {case.tg}" if case.tg else "each request's own length (a dataset's answers)"
        return Warning_(
            Code.OUTPUT_LENGTH_MISMATCH,
            WARNING,
            case.label,
            f"{found.requests} of {found.of} requests got fewer tokens than {asked} asked "
            f"(median {found.delivered}, min {found.least}): {cause}. "
            f"The row is labelled with the tokens delivered; its rates are real for those, but "
            f"not comparable with tg{case.tg} elsewhere.",
            hint,
            details=OutputLengthMismatch(
                asked=case.tg,
                delivered_median=found.delivered,
                delivered_min=found.least,
                delivered_max=found.most,
                short_requests=found.requests,
                finish_reasons=sorted({str(reason) for reason in found.finish_reasons}),
            ),
            evidence=(Evidence("delivered_median", found.delivered, case.tg, "tokens"),),
        )


output_length_mismatch = OutputLengthMismatchCheck()


def _short_output_cause(reasons: frozenset[Any], stop: tuple[str, ...]) -> tuple[str, str]:
    """Why outputs came back short, by what the server said (their finish_reasons) and what was sent."""
    if reasons == {"length"}:
        return (
            "the server ended them at a length limit below the one asked (finish_reason length)",
            "Check the server's own output cap (max_tokens limit, context length minus the prompt).",
        )
    if reasons == {"tool_calls"}:
        return (
            "the answers ended with their tool calls (finish_reason tool_calls): a call ends the "
            "model's turn, ignore_eos or not",
            "An agent's turn is as long as its call: compare with runs of the delivered length, "
            "or send --tool-choice none to measure text.",
        )
    if stop and "stop" in reasons:
        return (
            f"a stop string ({', '.join(map(repr, stop))}, from --stop) or the end-of-sequence "
            "token ended them (finish_reason stop)",
            "Drop --stop to measure a fixed output length; if they still end early, the server "
            "ignores ignore_eos and min_tokens.",
        )
    return (
        "the server stopped at its end of sequence: it ignored ignore_eos and min_tokens",
        "Use a server that honours ignore_eos (vLLM, SGLang, llama.cpp, TensorRT-LLM do), or "
        "compare against runs of the delivered length.",
    )


STOP_HINT = (
    "Stop only at <|return|> and <|call|>, the markers a Harmony turn really ends with (servers "
    "stop there already): drop the others from --stop and from the server's generation config."
)


# Harmony's two traps (formerly one function, harmony_output): registered one after the other.
@dataclass(frozen=True)
class StopCut(Share):
    """Measured requests a stop ended before any answer text, with the --stop strings sent and
    those that fire inside a Harmony response (setup.dangerous_stops)."""

    stop: tuple[str, ...]
    dangerous: tuple[DangerousStop, ...]


class DangerousStopCheck(Check[StopCut]):
    """Requests that a stop string ended before any answer text (report 000: a stop list
    holding <|message|> cut every answer to 0 tokens)."""

    code = Code.DANGEROUS_STOP

    def detect(self, case: CaseResult, run: RunView) -> StopCut | None:
        setup = run.setup
        facts = case.facts()  # finish_reason stop, no content, and not another failure
        if not (facts.n_stop_cut and (setup.stop or setup.template == "harmony")):
            return None
        return StopCut(facts.n_stop_cut, facts.n_measured, tuple(setup.stop), tuple(setup.dangerous_stops))

    def words(self, case: CaseResult, found: StopCut) -> CheckWarning:
        return Warning_(
            Code.DANGEROUS_STOP,
            _failure_severity(case),
            case.label,
            f"{found.requests} of {found.of} requests stopped (finish_reason stop) before any "
            f"answer text: {_stop_cause(found)}.",
            STOP_HINT,
            details=DangerousStopFound(
                requests=found.requests, stop=list(found.stop), dangerous_stops=list(found.dangerous)
            ),
        )


dangerous_stop = DangerousStopCheck()


class SpecialTokensStripped(Check[Share]):
    """The server dropped Harmony's markers, so reasoning and answer cannot be told apart."""

    code = Code.SPECIAL_TOKENS_STRIPPED

    def detect(self, case: CaseResult, run: RunView) -> Share | None:
        facts = case.facts()  # Anomaly.SPECIAL_TOKENS_STRIPPED
        return Share(facts.n_stripped, facts.n_ok) if facts.n_stripped else None

    def words(self, case: CaseResult, found: Share) -> CheckWarning:
        return Warning_(
            Code.SPECIAL_TOKENS_STRIPPED,
            WARNING,
            case.label,
            f"{found.requests} of {found.of} requests came back as Harmony text "
            "without its special tokens ('analysisWe need…assistantfinal…'): reasoning and "
            "answer cannot be told apart, so all of it counts as content and time to first "
            "content is withheld.",
            "Make the server keep special tokens (benchy sends skip_special_tokens: false; a "
            "proxy or server may drop it), or use --endpoint chat, where the server splits "
            "the channels.",
            details=RequestCount(requests=found.requests),
        )


special_tokens_stripped = SpecialTokensStripped()


def _stop_cause(found: StopCut) -> str:
    if found.dangerous:
        first = found.dangerous[0]
        return f"--stop {first.stop!r} occurs inside every Harmony response ({first.reason})"
    if found.stop:
        return f"a --stop string ({', '.join(map(repr, found.stop))}) matched before the answer"
    return (
        "the server's own stop list (generation_config, --override-generation-config) holds a "
        "string that occurs inside a Harmony response"
    )


@dataclass(frozen=True)
class CutShort:
    """The run stopped inside the case: why (the withheld rates' reason), and the requests
    measured against those planned."""

    why: str
    measured: int
    planned: int | None


class CaseCutShortCheck(Check[CutShort]):
    """The run stopped inside this case (results withheld its rates): say so wherever the
    case's figures are read, not only in report.md's banner."""

    code = Code.CASE_CUT_SHORT

    def detect(self, case: CaseResult, run: RunView) -> CutShort | None:
        why = case.reason("aggregate_tps")
        if why.code != unavailable.CUT_SHORT:
            return None
        return CutShort(why.message, _measured(case), case.planned_requests)

    def words(self, case: CaseResult, found: CutShort) -> CheckWarning:
        return Warning_(
            Code.CASE_CUT_SHORT,
            WARNING,
            case.label,
            f"The run stopped inside this case: {found.why}. Aggregate t/s and req/s are "
            "withheld; the per-request figures are those of the requests that finished, which favour "
            "the ones that finished first.",
            "Run the case to its end for figures of the whole case.",
            details=CaseCutShort(measured=found.measured, planned=found.planned),
        )


case_cut_short = CaseCutShortCheck()
