"""Dataclasses to JSON and back, and their JSON Schema: one description of a saved file.

results.json is made of dataclasses (results.py). This module turns them into plain JSON
values, reads them back with a one-line message naming the first field that does not fit, and
writes the JSON Schema that benchy ships (benchy/data/results.schema.json), all from the same
type hints, so the schema cannot drift from the code that writes the file.

Supported field types: bool, int, float, str, None, `X | None`, list[X], tuple[X, ...],
dict[str, X], plain `dict` (any JSON object), `Any` and nested dataclasses. Field metadata:
  doc        a description for the schema
  omit_none  leave the key out when the value is None (or an empty dict/list), as files of
             earlier versions did, so a reader of those versions sees the same shape
  tag, variant, variants
             a field whose class another field names (a warning's figures, by its code):
             variant(value of the field `tag`) is the class to read it as; variants() each
             tag's class, for the schema (which pins each tag's, and takes any for another tag)
"""

from __future__ import annotations

import dataclasses
import functools
import json
import operator
import os
import types
import typing
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeAlias, TypeVar, Union

# A JSON object as a parser gives it, or as a request body or saved entry is built: its keys are
# strings, its values any JSON value (checked where they are read). The one name for what was a
# bare `dict` across the stages that speak JSON (wire bodies, traces, schemas).
JsonObject: TypeAlias = dict[str, Any]


def loads(text: bytes) -> Any:
    """JSON through orjson (a long run's results.json parses 3x faster), else json, which also
    reads what orjson refuses (NaN, written by benchy before 1.7) and words the errors."""
    try:
        return _orjson_loads(text)
    except ValueError:
        return json.loads(text.decode("utf-8"))


try:
    from orjson import loads as _orjson_loads
except ImportError:  # pragma: no cover
    _orjson_loads = json.loads  # type: ignore[assignment]


class ShapeError(ValueError):
    """A JSON value that does not fit the dataclass; the message names the field's path."""


def described(doc: str, default: Any = None, factory: Any = None, omit: bool = False) -> Any:
    """A dataclass field with a default and a description for the schema; omit: left out of
    the JSON while it is empty."""
    meta = {"doc": doc, "omit_none": omit}
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


_S = TypeVar("_S", bound="Saved")


class Saved:
    """Base of a dataclass saved as JSON: `to_dict()` and `from_dict(data, strict=False)`."""

    __slots__ = ()  # so that a slotted dataclass (RequestResult) has no __dict__ either

    def to_dict(self) -> JsonObject:
        made: JsonObject = to_json(self)
        return made

    @classmethod
    def from_dict(cls: type[_S], data: JsonObject, strict: bool = False) -> _S:
        made: _S = from_json(cls, data, strict=strict)
        return made


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def serialized_fields(cls: type) -> list[dataclasses.Field[Any]]:
    """The fields that go into JSON (a class may list others in `_NOT_SAVED`), in the order
    its `saved_order()` gives where it has one (records/plan.py's Tagged)."""
    return list(_serialized(cls))


@functools.cache
def _serialized(cls: type) -> tuple[dataclasses.Field[Any], ...]:
    skipped = getattr(cls, "_NOT_SAVED", ())
    made = [f for f in dataclasses.fields(cls) if f.name not in skipped]
    order = getattr(cls, "saved_order", None)  # a class's saved order, where not its fields' own
    if order is None:
        return tuple(made)
    at = {name: i for i, name in enumerate(order())}
    return tuple(sorted(made, key=lambda f: at[f.name]))


def _empty(value: Any) -> bool:
    return value is None or (isinstance(value, (dict, list, tuple)) and not value)


_SCALARS = frozenset((str, int, float, bool, type(None)))  # exactly these classes: already JSON


@functools.cache
def _saved_fields(cls: type) -> tuple[Callable[[Any], tuple[Any, ...]], tuple[tuple[str, bool], ...]]:
    """A getter of a dataclass's serialized values (a tuple, in order), and each one's name and
    whether it is left out when empty: made once a class."""
    fields = serialized_fields(cls)
    names = [f.name for f in fields]
    getter = operator.attrgetter(*names) if len(names) > 1 else (lambda v: tuple(getattr(v, n) for n in names))
    return getter, tuple((f.name, bool(f.metadata.get("omit_none"))) for f in fields)


def to_json(value: Any) -> Any:
    """A dataclass (or list/dict of them) as plain JSON values. A saved row holds about a
    hundred values, most of them scalars: those are passed at once, and a dataclass's fields
    are looked up once per class (a spilled case's rows are written out at the run's end)."""
    cls = value.__class__
    if cls in _SCALARS:
        return value
    if cls is dict:
        return {str(k): v if v.__class__ in _SCALARS else to_json(v) for k, v in value.items()}
    if cls is list:
        return [v if v.__class__ in _SCALARS else to_json(v) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out = {}
        getter, fields = _saved_fields(cls)
        for (name, omit), item in zip(fields, getter(value)):
            if omit and _empty(item):
                continue
            out[name] = item if item.__class__ in _SCALARS else to_json(item)
        return out
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):  # rows on disk (results/rows.py)
        return [to_json(v) for v in value]
    return value


def _is_union(tp: Any) -> bool:
    return typing.get_origin(tp) in (Union, types.UnionType)


def from_json(tp: Any, value: Any, path: str = "", strict: bool = False) -> Any:
    """`value` read as type `tp`; raises ShapeError naming the path of a value that does not fit.
    Keys a dataclass does not know are ignored (a reader keeps what it understands), unless
    `strict` (benchy checking that a file it wrote reads back: an unknown key is a field someone
    forgot to add; the setup and results are built typed, so mypy checks their fields).

    A reader made once per type does the work (a results file of 20,000 requests reads in
    well under a second, not 25 s); only a value that does not fit is read again, slowly, to
    name its path."""
    try:
        return _reader(tp)(value, strict)
    except _Misfit:
        return _from_json_naming(tp, value, path, strict)


class _Misfit(Exception):
    """A value that does not fit, raised by the fast readers (no path: that costs)."""


_Reader = typing.Callable[[Any, bool], Any]


def _identity(value: Any, strict: bool) -> Any:
    return value


@functools.cache
def _reader(tp: Any) -> _Reader:
    """A function reading a JSON value as `tp`, checking what from_json checks, raising _Misfit."""
    if tp is Any:
        return _identity
    if _is_union(tp):
        return _union_reader(tp)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return _dataclass_reader(tp)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (list, tuple):
        return _list_reader(_reader(args[0] if args else Any), origin is tuple)
    if origin is dict or tp is dict:
        return _dict_reader(_reader(args[1] if args else Any))
    if tp in (float, int, str, bool):
        return _scalar_reader(tp)
    raise TypeError(f"jsontypes: unsupported type {tp!r}")  # a programming error


def _union_reader(tp: Any) -> _Reader:
    args = typing.get_args(tp)
    optional = type(None) in args
    readers = [_reader(a) for a in args if a is not type(None)]

    def read(value: Any, strict: bool) -> Any:
        if value is None and optional:
            return None
        for one in readers:
            try:
                return one(value, strict)
            except _Misfit:
                pass
        raise _Misfit

    return read


def _dataclass_reader(cls: type) -> _Reader:
    hints = _hints(cls)
    known = serialized_fields(cls)
    names = {f.name for f in known}
    tagged = [(f.name, f.metadata["tag"], f.metadata["variant"]) for f in known if "variant" in f.metadata]
    readers = [(f.name, _reader(hints[f.name])) for f in known if "variant" not in f.metadata]
    required = [f.name for f in known if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]

    def read(value: Any, strict: bool) -> Any:
        if not isinstance(value, dict) or (strict and not names.issuperset(value)):
            raise _Misfit
        kwargs = {name: one(value[name], strict) for name, one in readers if name in value}
        for name, tag, variant in tagged:
            if name in value:
                kwargs[name] = _reader(variant(value.get(tag)))(value[name], strict)
        if len(kwargs) < len(known) and any(name not in value for name in required):
            raise _Misfit
        return cls(**kwargs)

    return read


def _list_reader(item: _Reader, as_tuple: bool) -> _Reader:
    def read(value: Any, strict: bool) -> Any:
        if not isinstance(value, list):
            raise _Misfit
        items = value[:] if item is _identity else [item(v, strict) for v in value]
        return tuple(items) if as_tuple else items

    return read


def _dict_reader(item: _Reader) -> _Reader:
    def read(value: Any, strict: bool) -> Any:
        if not isinstance(value, dict):
            raise _Misfit
        return dict(value) if item is _identity else {k: item(v, strict) for k, v in value.items()}

    return read


def _scalar_reader(tp: type) -> _Reader:
    kinds: tuple[type, ...] = (int, float) if tp is float else (tp,)
    no_bool = tp in (int, float)

    def read(value: Any, strict: bool) -> Any:
        if not isinstance(value, kinds) or (no_bool and isinstance(value, bool)):
            raise _Misfit
        return value

    return read


def _from_json_naming(tp: Any, value: Any, path: str = "", strict: bool = False) -> Any:
    """from_json, slowly, naming the path of the value that does not fit (ShapeError)."""
    if tp is Any:
        return value
    if _is_union(tp):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in (a for a in args if a is not type(None)):
            try:
                return _from_json_naming(arg, value, path, strict)
            except ShapeError as exc:
                errors.append(str(exc))
        raise ShapeError(
            errors[0] if len(errors) == 1 else f"{path or 'value'}: {_describe(value)} fits none of its types"
        )
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return _dataclass_from_json(tp, value, path, strict)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (list, tuple):
        _expect(isinstance(value, list), "a list", value, path)
        items = [_from_json_naming(args[0] if args else Any, v, f"{path}[{i}]", strict) for i, v in enumerate(value)]
        return tuple(items) if origin is tuple else items
    if origin is dict or tp is dict:
        _expect(isinstance(value, dict), "an object", value, path)
        item = args[1] if args else Any
        return {k: _from_json_naming(item, v, f"{path}.{k}", strict) for k, v in value.items()}
    if tp is float:
        _expect(isinstance(value, (int, float)) and not isinstance(value, bool), "a number", value, path)
        return value
    if tp is int:
        _expect(isinstance(value, int) and not isinstance(value, bool), "an integer", value, path)
        return value
    if tp in (str, bool):
        _expect(isinstance(value, tp), "a string" if tp is str else "true or false", value, path)
        return value
    raise TypeError(f"jsontypes: unsupported type {tp!r} at {path}")  # a programming error


def _dataclass_from_json(cls: type, value: Any, path: str, strict: bool) -> Any:
    _expect(isinstance(value, dict), "an object", value, path)
    hints = _hints(cls)
    known = serialized_fields(cls)
    if strict:
        unknown = set(value) - {f.name for f in known}
        if unknown:
            raise ShapeError(f"{path or 'top level'}: unknown field {sorted(unknown)[0]!r} (add it to {cls.__name__})")
    kwargs = {}
    for f in known:
        if f.name in value:
            where = f"{path}.{f.name}" if path else f.name
            tp = f.metadata["variant"](value.get(f.metadata["tag"])) if "variant" in f.metadata else hints[f.name]
            kwargs[f.name] = _from_json_naming(tp, value[f.name], where, strict)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise ShapeError(f"{path or 'top level'}: missing field {f.name!r}")
    return cls(**kwargs)


def _expect(ok: bool, what: str, value: Any, path: str) -> None:
    if not ok:
        raise ShapeError(f"{path or 'value'}: expected {what}, got {_describe(value)}")


def _describe(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


# ------------------------------------------------------------------ JSON Schema


def json_schema(cls: type, schema_id: str, title: str) -> JsonObject:
    """A JSON Schema (draft 2020-12) of `cls`, each dataclass under $defs."""
    defs: dict[str, JsonObject] = {}
    root = _schema_of(cls, defs)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": schema_id,
        "title": title,
        **root,
        "$defs": dict(sorted(defs.items())),
    }


def _schema_of(tp: Any, defs: dict[str, JsonObject]) -> JsonObject:
    if tp is Any:
        return {}
    if _is_union(tp):
        options = [_schema_of(a, defs) for a in typing.get_args(tp)]
        return {"anyOf": options}
    if tp is type(None):
        return {"type": "null"}
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        if tp.__name__ not in defs:
            defs[tp.__name__] = {}  # reserve: a recursive reference ends here
            defs[tp.__name__] = _dataclass_schema(tp, defs)
        return {"$ref": f"#/$defs/{tp.__name__}"}
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (list, tuple):
        return {"type": "array", "items": _schema_of(args[0], defs) if args else {}}
    if origin is dict or tp is dict:
        return {"type": "object", "additionalProperties": _schema_of(args[1], defs) if args else {}}
    simple = {float: "number", int: "integer", str: "string", bool: "boolean"}
    return {"type": simple[tp]}


def _dataclass_schema(cls: type, defs: dict[str, JsonObject]) -> JsonObject:
    hints = _hints(cls)
    properties, required, pinned = {}, [], []
    for f in serialized_fields(cls):
        if "variants" in f.metadata:
            tag, by_tag = f.metadata["tag"], f.metadata["variants"]()
            choices = dict.fromkeys([*by_tag.values(), f.metadata["variant"](None)])
            prop = {"anyOf": [_schema_of(one, defs) for one in choices]}
            pinned += [
                {
                    "if": {"properties": {tag: {"const": value}}, "required": [tag]},
                    "then": {"properties": {f.name: _schema_of(one, defs)}},
                }
                for value, one in by_tag.items()
            ]
        else:
            prop = _schema_of(hints[f.name], defs)
        if f.metadata.get("doc"):
            prop = {"description": f.metadata["doc"], **prop}
        properties[f.name] = prop
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            required.append(f.name)
    doc = (cls.__doc__ or "").strip().split("\n\n")[0].replace("\n", " ")
    out: JsonObject = {"type": "object"}
    if doc:
        out["description"] = doc
    out["properties"] = properties
    if required:
        out["required"] = required
    out["additionalProperties"] = False
    if pinned:
        out["allOf"] = pinned
    return out


def write_schema_file(path: Path, schema: JsonObject) -> Path:
    """Writes a shipped JSON Schema: one layout for every schema benchy ships, so that a
    regenerated file differs from the shipped one only where the types changed."""
    path.write_text(json.dumps(schema, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def write_json_file(path: Path, data: object) -> Path:
    """Writes a saved file atomically (a reader, or a kill, never meets half a file); the folder
    is made with its first file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path


def write_manifest_file(path: Path, manifest: Saved) -> Path:
    """Writes a bundle's manifest atomically."""
    return write_json_file(path, manifest.to_dict())


def read_json_file(
    path: Path,
    cls: type[_S],
    error: type[Exception],
    refused: Callable[[object], str | None],
    missing: str | None = None,
) -> _S:
    """A saved file as `cls`, or `error` with one line: unreadable, not JSON, a schema that
    `refused` (given the file's `schema` value) says why it cannot read, or a shape that does not
    fit. A file that is not there says `missing` after its name, where given."""
    try:
        data = loads(path.read_bytes())
    except FileNotFoundError as exc:
        if missing is None:
            raise error(f"{path}: cannot read: {exc.strerror}") from None
        raise error(f"{path.parent}: no {path.name}{missing}") from None
    except OSError as exc:
        raise error(f"{path}: cannot read: {exc.strerror}") from None
    except ValueError as exc:
        raise error(f"{path}: not JSON ({exc})") from None
    why = refused(data.get("schema") if isinstance(data, dict) else None)
    if why is not None:
        raise error(f"{path}: {why}")
    try:
        return cls.from_dict(data)
    except ShapeError as exc:
        raise error(f"{path}: malformed: {exc}") from None


def read_manifest_file(path: Path, cls: type[_S], major: str, error: type[Exception], missing: str) -> _S:
    """A bundle's manifest of schema `major`.x as `cls`; `error` (one line) when it is missing
    (`missing` says what that means), unreadable, of another schema or malformed."""

    def refused(schema: object) -> str | None:
        if isinstance(schema, str) and schema.split(".")[0] == major:
            return None
        return f"schema {schema!r}: this benchy reads {major}.x only"

    return read_json_file(path, cls, error, refused, missing)
