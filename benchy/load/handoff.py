"""What keeps a worker's event loop reading while it hands its records to the parent.

A worker stamps every event it reads; any time its loop spends elsewhere delays those stamps.
Two such places were measured (benchmarks/bench_streams.py, BENCHY_WORKER_TRACE): a blocking
write of a big batch of finished records to the parent's pipe, which waits for the parent to
read it (at a round's end the parent is busy with every worker's batch), and the collector's
full passes over every object the process holds (imports, prompts: tens of thousands).

- **The hand-off never blocks the loop** (`Sender`): the loop pickles a message and queues the
  bytes; a thread writes them to the pipe (the write releases the GIL while it waits), one
  whole message at a time and in order. A batch is cut into messages of at most MAX_RECORDS
  records (`pieces`), pickled one per turn of the loop, so no single pickle holds it long.
- **The collector passes over the case's own objects only** (`frozen_heap`): once a worker's
  share is ready to start, what is alive then is collected once and frozen (gc.freeze: left
  out of every later pass), and unfrozen when the share ends.
"""

from __future__ import annotations

import contextlib
import gc
import queue
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from multiprocessing.connection import Connection
from multiprocessing.reduction import ForkingPickler

from benchy.measure.health import LoopHealth
from benchy.records import RequestRecord
from benchy.records.plan import Sent

MAX_RECORDS = 32  # records per message: one pickle of them is well under a millisecond


@dataclass
class Batch:
    """What a worker sends its parent (over its pipe, or from a Ray actor): the requests just
    sent (each its planned record, stamped when sent, and its plan's tags: the parent writes
    their plan lines and knows them in flight should the worker be lost), those finished (the
    records themselves: pickle carries a slotted dataclass, so no dict and back), whether the
    warmups are done (`ready`), and at the share's end its loop figures or the error that ended
    it (kind, message)."""

    sent: list[Sent] = field(default_factory=list)
    records: list[RequestRecord] = field(default_factory=list)
    ready: bool = False
    figures: LoopHealth | None = None
    error: tuple[str, str] | None = None

    @property
    def last(self) -> bool:
        """The worker's last word on its share: nothing is measured after it."""
        return self.figures is not None or self.error is not None


def pieces(batch: Batch) -> list[Batch]:
    """A batch as messages of at most MAX_RECORDS records, in order: the first carries the
    sends (a request is known in flight before it is finished) and the ready flag, the last
    the share's end (figures or error), which the parent takes as the worker's last word."""
    records = batch.records
    if len(records) <= MAX_RECORDS:
        return [batch]
    out = [Batch(records=records[i : i + MAX_RECORDS]) for i in range(0, len(records), MAX_RECORDS)]
    out[0] = replace(out[0], sent=batch.sent, ready=batch.ready)
    out[-1] = replace(out[-1], figures=batch.figures, error=batch.error)
    return out


class Sender:
    """Writes pickled messages to a Connection from a thread of its own, in order. Every
    message of the process goes through it (a Connection is not safe for two writers)."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn
        self._queue: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self.failed: OSError | None = None  # the pipe broke: the parent is gone
        self._thread = threading.Thread(target=self._write, name="benchy-sender", daemon=True)
        self._thread.start()

    def send(self, message: object) -> None:
        self._queue.put(bytes(ForkingPickler.dumps(message)))

    def _write(self) -> None:
        while (data := self._queue.get()) is not None:
            try:
                self._conn.send_bytes(data)
            except OSError as exc:
                self.failed = exc
                return

    def close(self, timeout_s: float = 10.0) -> None:
        """Writes what is queued, then ends the thread."""
        self._queue.put(None)
        self._thread.join(timeout_s)


@contextlib.contextmanager
def frozen_heap() -> Iterator[None]:
    """Collects once and freezes what is alive, for the duration (see the module)."""
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
