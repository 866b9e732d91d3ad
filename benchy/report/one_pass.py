"""One pass over a long case's rows for the whole report (issue 54: `benchy report` on 20,000
requests took 2.8x its time on 2,000).

A case whose rows are on disk (results/rows.py) is read back row by row, each line parsed into
a RequestResult: the report's main cost on a long run. Two readers wanted every row: the
figures' and checks' RowScan (results/types.py) and report.html's scatter of every request
(html_figures._dots), each made once per case but each its own pass. `prime` makes both in
one pass and leaves them where each reader looks (Rows.remember), so the rows are parsed once.
"""

from __future__ import annotations

from benchy.report.html_figures import DOTS_KEY, dot
from benchy.results.rows import Rows
from benchy.results.types import RowScan, RunResult


def prime(results: RunResult) -> None:
    """The scan and the scatter's dots of every case whose rows are on disk, in one pass each."""
    for case in results.cases:
        rows = case.requests
        if not isinstance(rows, Rows) or not rows.spilled:
            continue  # held rows: each reader's pass costs no parsing
        scan, dots = RowScan(), []
        for r in rows:
            scan.add(r)
            if not r.warmup:
                dots.append(dot(r))
        rows.remember(RowScan.KEY, scan)
        rows.remember(DOTS_KEY, dots)
