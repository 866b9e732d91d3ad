"""The one maker of a warning: a code of the closed set, a severity its rule allows, and the
figures of its code's class. A check (checks/) and a decided finding (results/findings.py)
make their warnings through it."""

from __future__ import annotations

from benchy.results.types import CheckWarning, Evidence
from benchy.results.verdicts.codes import VERDICTS, Code
from benchy.results.verdicts.details import Details


def warning(
    code: Code,
    severity: str,
    case: str | None,
    message: str,
    hint: str,
    metrics: tuple[str, ...] | None = None,
    withheld: tuple[str, ...] | None = None,
    details: Details | None = None,
    evidence: tuple[Evidence, ...] = (),
) -> CheckWarning:
    """A CheckWarning; `metrics` it qualifies (the table marks them) and `withheld`, the metrics
    the analysis made unavailable for the reason it reports, are its code's entry in VERDICTS
    (codes.py), or the part of it this case's evidence names; `details` the figures behind the
    message (none: its class empty), `evidence` the observed figure against its threshold. A
    code outside the closed set, a severity its rule does not allow, figures of another code's
    class or a metric its code's entry does not name are a programming error: ValueError."""
    if not isinstance(code, Code) or not code.allows(severity):
        raise ValueError(f"warning {code!r} of severity {severity!r}: not a Code, or not its rule's severity")
    figures = code.details() if details is None else details
    if type(figures) is not code.details:
        raise ValueError(f"warning {code.value}: figures {type(figures).__name__}, not {code.details.__name__}")
    entry = VERDICTS[code]
    qualified = entry.qualifies if metrics is None else _part(code, metrics, entry.qualifies)
    gone = entry.withholds if withheld is None else _part(code, withheld, entry.withholds)
    return CheckWarning(code.value, severity, case, message, hint, list(qualified), list(gone), figures, list(evidence))


def _part(code: Code, names: tuple[str, ...], entry: tuple[str, ...]) -> tuple[str, ...]:
    """`names`, where its code's entry names each of them."""
    if not set(names) <= set(entry):
        raise ValueError(f"warning {code.value}: {', '.join(sorted(set(names) - set(entry)))} not in its entry")
    return names
