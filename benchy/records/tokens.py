"""A request's output tokens as the live run counts them: the one definition.

Why one: the tally (load/tally.py), the workers' per-worker counts (load/workers.py) and the
failure rule (measure/classify.py) each counted "usage, else the events" on their own, two of
them with `or` (a usage of 0 fell through to the events), one with `is not None`. The server's
word is the count where it gave one, 0 included. Cheap enough for the event loop; the analysis's
count, which weighs every witness (measure/reading.py, evidence.token_count), is another figure.
"""

from __future__ import annotations

from benchy.records import RequestRecord


def tokens_of(rec: RequestRecord) -> int:
    """usage.completion_tokens where the server reported it, else the events that carried text."""
    return rec.completion_tokens if rec.completion_tokens is not None else len(rec.token_event_s)
