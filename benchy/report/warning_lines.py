"""The warnings as the terminal shows them after the table: one entry per cause, not per case.

A sweep on a server with fewer slots than requests in flight raised the same queueing warning
for each of its eight cases, eight near-identical paragraphs, and a note about benchy's local
token count came twice a case. The terminal groups warnings of one code and one hint (one cause,
one remedy): the first case's words, then every case it concerns. results.json and report.md
keep each warning whole, case by case. With -q, notes (severity info) are left out here.
"""

from __future__ import annotations

from benchy.results.types import CheckWarning
from benchy.results.verdicts.codes import INFO


def grouped(warnings: list[CheckWarning]) -> list[list[CheckWarning]]:
    """Warnings of one severity, code and hint together, in the order each first appears."""
    groups: dict[tuple[str, str, str], list[CheckWarning]] = {}
    for w in warnings:
        groups.setdefault((w.severity, w.code, w.hint), []).append(w)
    return list(groups.values())


def terminal_lines(warnings: list[CheckWarning], quiet: bool = False) -> list[str]:
    """One paragraph per cause: `severity: code [cases]: message` and its hint."""
    out = []
    notes_left_out = 0
    for group in grouped(warnings):
        first = group[0]
        if quiet and first.severity == INFO:
            notes_left_out += 1
            continue
        cases = list(dict.fromkeys(w.case for w in group if w.case))
        if len(cases) > 1:
            where = f" [{len(cases)} cases: {', '.join(cases)}]"
            said = f"{first.message} (that is {cases[0]}; the others' figures are in results.json and report.md)"
        else:
            where = f" [{cases[0]}]" if cases else ""
            said = first.message
        out.append(f"\n{first.severity}: {first.code}{where}: {said}\n  hint: {first.hint}")
    if notes_left_out:
        out.append(f"\n({notes_left_out} note(s) left out by -q: see results.json or report.md)")
    return out
