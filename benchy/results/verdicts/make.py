"""The one maker of a warning: a code of the closed set, a severity its rule allows, and the
figures of its code's class. A check (checks/) and a trap's own module (verdicts/queueing.py)
make their warnings through it."""

from __future__ import annotations

from benchy.results.types import CheckWarning, Evidence
from benchy.results.verdicts.codes import Code
from benchy.results.verdicts.details import Details


def warning(
    code: Code,
    severity: str,
    case: str | None,
    message: str,
    hint: str,
    metrics: tuple[str, ...] = (),
    withheld: tuple[str, ...] = (),
    details: Details | None = None,
    evidence: tuple[Evidence, ...] = (),
) -> CheckWarning:
    """A CheckWarning; `metrics` it qualifies (the table marks them), `withheld` the metrics the
    analysis made unavailable for the reason it reports, `details` the figures behind the
    message (none: its class empty), `evidence` the observed figure against its threshold. A
    code outside the closed set, a severity its rule does not allow or figures of another
    code's class are a programming error: ValueError."""
    if not isinstance(code, Code) or not code.allows(severity):
        raise ValueError(f"warning {code!r} of severity {severity!r}: not a Code, or not its rule's severity")
    figures = code.details() if details is None else details
    if type(figures) is not code.details:
        raise ValueError(f"warning {code.value}: figures {type(figures).__name__}, not {code.details.__name__}")
    return CheckWarning(
        code.value, severity, case, message, hint, list(metrics), list(withheld), figures, list(evidence)
    )
