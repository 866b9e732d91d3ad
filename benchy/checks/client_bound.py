"""A case that drove more than half of this host's client ceiling (`benchy selftest`, cached per
host and saved in the setup): benchy, not the server, may have set its pace and its stamps."""

from __future__ import annotations

from dataclasses import dataclass

from benchy.checks.check import Check
from benchy.checks.registry import WARNING, Code, Warning_
from benchy.measure.selftest import CLIENT_BOUND_SHARE, ClientCeiling
from benchy.results.types import CaseResult, CheckWarning, Evidence
from benchy.results.view import RunView


def driven(case: CaseResult) -> tuple[float | None, float | None]:
    """(requests/s, SSE events/s) the case drove per worker process, where known."""
    workers = (case.client.workers if case.client else None) or 1
    requests = case.request_rate / workers if case.request_rate else None
    per_event = case.summary.get("tokens_per_event")
    events = (
        case.aggregate_tps / per_event.median / workers
        if case.aggregate_tps and per_event and per_event.median
        else None
    )
    return requests, events


@dataclass(frozen=True)
class Driven:
    """The host's client ceiling, and each pace the case drove past its share of it (observed
    per worker process against that share)."""

    ceiling: ClientCeiling
    past: tuple[Evidence, ...]


class ClientBound(Check[Driven]):
    code = Code.CLIENT_BOUND

    def detect(self, case: CaseResult, run: RunView) -> Driven | None:
        ceiling = run.setup.client_ceiling if run.setup else None
        if ceiling is None:
            return None
        requests, events = driven(case)
        found = tuple(
            Evidence(name, observed, limit * CLIENT_BOUND_SHARE, unit)
            for name, observed, limit, unit in (
                ("requests_per_s", requests, ceiling.requests_per_s, "requests/s"),
                ("events_per_s", events, ceiling.events_per_s, "events/s"),
            )
            if observed is not None and limit and observed > limit * CLIENT_BOUND_SHARE
        )
        return Driven(ceiling, found) if found else None

    def words(self, case: CaseResult, found: Driven) -> CheckWarning:
        said = "; ".join(
            f"{e.observed:,.0f} {e.unit} of a ceiling of {(e.threshold or 0) / CLIENT_BOUND_SHARE:,.0f}"
            for e in found.past
        )
        return Warning_(
            Code.CLIENT_BOUND,
            WARNING,
            case.label,
            f"the case drove more than half of this host's client ceiling ({said}, per worker process; "
            f"benchy selftest of {found.ceiling.measured_utc}): benchy's own pace and stamps may be in its figures.",
            "Spread the load over more worker processes (--workers) or hosts, or run benchy on a faster "
            "machine; `benchy selftest` measures the ceiling again.",
            evidence=found.past,
        )


client_bound = ClientBound()  # registered by this name (checks/warnings.py)
