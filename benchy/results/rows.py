"""A case's requests (RequestResult rows) without holding them all: memory flat in a run's length.

A 200,000-request soak held each request's row (about 5 KB) for the whole run: 1.45 GB. `Rows`
keeps the first `IN_MEMORY` rows of a case as objects (a short case costs nothing more), and
beyond that writes every row, one JSON line each, to a temporary file (in the run's output
folder, deleted when the run's process ends); what stays per request is its line's offset and
three flags (warmup, ok, control). Iterating re-reads the rows a line at a time, so a
reader holds one row at once. results.json (files.py) keeps one request a line too, so a
saved run reads back the same way: `Rows.of_file` indexes those lines and reads none of them.

Append-only: a row is written once and never changed. A row read back is a fresh object:
changing it changes nothing stored. What the builder decides for every row of a case (its
buffering verdict, a withheld figure) is decided before the case's rows are written
(results/build.py writes each row once, its verdicts applied), so results.json copies a
spilled case's lines (`lines`) without parsing a row.
"""

from __future__ import annotations

import os
import tempfile
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from copy import deepcopy
from pathlib import Path
from typing import IO, Any, overload

from benchy import records

_SET = os.environ.get("BENCHY_ROWS_IN_MEMORY", "")  # a tuning knob (tests spill with 1)
IN_MEMORY = int(_SET) if _SET.isdigit() else 4096  # rows per case held as objects

WARMUP, OK, CONTROL = 1, 2, 4  # a row's flags


def flags_of(row: Any) -> int:
    return (WARMUP if row.warmup else 0) | (OK if row.ok else 0) | (CONTROL if row.control else 0)


_FLAGS = ((b'"warmup":true', WARMUP), (b'"status":"ok"', OK), (b'"control":true', CONTROL))


def _flags_of_line(line: bytes) -> int:
    """A saved row's flags from its compact JSON (records.dumps): a key's bytes cannot occur
    inside a string, where its quotes are escaped. ValueError for a line not written so."""
    if b'"warmup":' not in line or b'"status":' not in line:
        raise ValueError("not a request line as benchy writes it")
    return sum(flag for key, flag in _FLAGS if key in line)


class Rows(Sequence[Any]):
    """A case's rows: objects up to `in_memory`, then lines of a file (see the module's doc)."""

    def __init__(
        self, spill_dir: Path | None = None, in_memory: int | None = None, *, parse: Callable[[bytes], Any]
    ) -> None:
        self._parse = parse  # a saved row's line → its row (RequestResult.of_line)
        self._objects: list[Any] | None = []
        self._spill_dir = spill_dir
        self._in_memory = IN_MEMORY if in_memory is None else in_memory
        self._file: IO[bytes] | None = None
        self._offsets = array("q")  # where each row's line starts
        self._ends = array("q")  # and ends
        self._flags = bytearray()
        self._size = 0  # the spill file's length: where the next line goes
        self._own = False  # the file is this Rows' spill file (not a saved results.json)

    @classmethod
    def of_file(cls, fh: IO[bytes], spans: Iterable[tuple[int, int]], *, parse: Callable[[bytes], Any]) -> Rows:
        """Rows already on disk, a JSON object in each (start, end) span of `fh` (results.json's
        requests, a line each); their flags are found in the lines' bytes (no row is built:
        a bad value is found when its row is read) and no row is kept."""
        rows = cls(parse=parse)
        rows._objects, rows._file = None, fh  # not its own: never copied (lines)
        for start, end in spans:
            rows._offsets.append(start)
            rows._ends.append(end)
        fd = fh.fileno()
        rows._flags = bytearray(_flags_of_line(os.pread(fd, e - s, s)) for s, e in zip(rows._offsets, rows._ends))
        return rows

    def like(self) -> Rows:
        """An empty Rows that spills where this one does, parsing its lines the same way."""
        return Rows(self._spill_dir, self._in_memory, parse=self._parse)

    @property
    def flags(self) -> bytes:
        """Each row's flags (WARMUP, OK, CONTROL), in order, read from no row."""
        return bytes(self._flags)

    @property
    def spilled(self) -> bool:
        return self._objects is None

    def append(self, row: Any) -> None:
        self._flags.append(flags_of(row))
        if self._objects is not None:
            self._objects.append(row)
            if len(self._objects) > self._in_memory:
                self._spill()
            return
        self._write(row)

    def count(self, want: Callable[[int], bool]) -> int:
        """How many rows' flags satisfy `want`, reading none."""
        return sum(1 for f in self._flags if want(f))

    def where(self, want: Callable[[int], bool]) -> Sequence[Any]:
        """The rows whose flags satisfy `want`: a list when held, else a view that reads them."""
        if self._objects is not None:
            return [row for row, f in zip(self._objects, self._flags) if want(f)]
        return _View(self, [i for i, f in enumerate(self._flags) if want(f)])

    def __len__(self) -> int:
        return len(self._flags)

    def __iter__(self) -> Iterator[Any]:
        if self._objects is not None:
            return iter(self._objects)
        return self._read(range(len(self._offsets)))

    def lines(self) -> Iterator[bytes] | None:
        """Each row's saved line (records.dumps of its to_dict, no newline), read without
        parsing: a spilled case's own spill file; else None (iterate it)."""
        if self._objects is not None or not self._own:
            return None
        return self._lines()

    def _lines(self) -> Iterator[bytes]:
        assert self._file is not None
        fd = self._file.fileno()
        for start, end in zip(self._offsets, self._ends):
            yield os.pread(fd, end - start - 1, start)  # less its newline

    @overload
    def __getitem__(self, i: int) -> Any: ...
    @overload
    def __getitem__(self, i: slice) -> list[Any]: ...
    def __getitem__(self, i: int | slice) -> Any:
        if self._objects is not None:
            return self._objects[i]
        if isinstance(i, slice):
            return list(self._read(range(len(self))[i]))
        return next(self._read([range(len(self))[i]]))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and len(self) == len(other) and all(a == b for a, b in zip(self, other))

    __hash__ = None  # type: ignore[assignment]

    def __deepcopy__(self, memo: dict[int, Any]) -> Rows:
        """An independent copy: the rows as read now, in a file of its own
        when they are past in_memory."""
        copy = self.like()
        for row in self:
            copy.append(row if self.spilled else deepcopy(row, memo))  # a row read back is already new
        return copy

    def _spill(self) -> None:
        held, self._objects = self._objects or [], None
        self._file, self._own = self._new_file(), True
        for row in held:
            self._write(row)

    def _new_file(self) -> IO[bytes]:
        return tempfile.TemporaryFile(prefix=".benchy-rows-", dir=self._spill_dir, buffering=0)

    def _write(self, row: Any) -> None:
        start, end = self._write_line(row)
        self._offsets.append(start)
        self._ends.append(end)

    def _write_line(self, row: Any) -> tuple[int, int]:
        """One line at the file's end, its (start, end) (pwrite/pread: no shared position, so
        a write between two reads of an iteration moves nothing)."""
        assert self._file is not None
        line = records.dumps(row.to_dict()).encode() + b"\n"
        start, self._size = self._size, self._size + len(line)
        os.pwrite(self._file.fileno(), line, start)
        return start, self._size

    def _read(self, indices: Iterable[int]) -> Iterator[Any]:
        """The rows at `indices`, each read and parsed as it is reached."""
        assert self._file is not None
        fd = self._file.fileno()
        for i in indices:
            start = self._offsets[i]
            yield self._parse(os.pread(fd, self._ends[i] - start, start))


class _View(Sequence[Any]):
    """Some of a spilled case's rows, by index: read when iterated, counted without reading."""

    def __init__(self, rows: Rows, indices: list[int]) -> None:
        self._rows, self._indices = rows, indices

    def __len__(self) -> int:
        return len(self._indices)

    def __iter__(self) -> Iterator[Any]:
        return self._rows._read(self._indices)

    def __getitem__(self, i: int | slice) -> Any:
        if isinstance(i, slice):
            return list(self._rows._read(self._indices[i]))
        return next(self._rows._read([self._indices[i]]))
