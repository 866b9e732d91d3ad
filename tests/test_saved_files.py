"""The saved files benchy reads back (probe.json, capacity.json, a bundle's manifest) share one
reader and one atomic writer: each bad file is one line that names the file and what is wrong
with it, and what is written reads back as it was."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchy import jsontypes
from benchy.probe import bundle as probe_bundle
from benchy.results import capacity, probe

READERS = {
    "probe.json": (probe.read, probe.ProbeFileError, probe.ProbeResult, probe.PROBE_SCHEMA),
    "capacity.json": (capacity.read, capacity.CapacityFileError, capacity.CapacityResult, capacity.CAPACITY_SCHEMA),
    "probe-manifest.json": (
        lambda path: probe_bundle.read_manifest(path.parent),
        probe_bundle.ProbeBundleError,
        probe_bundle.ProbeManifest,
        probe_bundle.PROBE_MANIFEST_SCHEMA,
    ),
}


@pytest.mark.parametrize("name", READERS)
@pytest.mark.parametrize(
    "text, words",
    [
        (None, "no "),  # not there
        ("{not json", "not json"),
        ('{"schema": "benchy/other/9.0"}', "schema 'benchy/other/9.0'"),
        ("[1, 2]", "schema none"),
        ("SHAPE", "malformed: "),  # the right schema, a field of another type
    ],
)
def test_a_bad_saved_file_is_one_line_naming_it(tmp_path, name, text, words):
    read, error, cls, schema = READERS[name]
    path = tmp_path / name
    if text == "SHAPE":
        first = next(f.name for f in jsontypes.serialized_fields(cls) if f.name != "schema")
        text = json.dumps({"schema": schema, first: [[]]})
    if text is not None:
        path.write_text(text, encoding="utf-8")
    with pytest.raises(error) as raised:
        read(path)
    message = str(raised.value)
    assert "\n" not in message and str(tmp_path) in message and words in message.lower()
    assert name in message or text is None


def test_a_capacity_file_of_a_newer_minor_asks_for_an_upgrade(tmp_path):
    major, minor = capacity.CAPACITY_MAJOR, capacity.CAPACITY_MINOR
    path = tmp_path / "capacity.json"
    path.write_text(json.dumps({"schema": f"benchy/capacity/{major}.{minor + 1}"}), encoding="utf-8")
    with pytest.raises(capacity.CapacityFileError, match="newer than this benchy.*upgrade"):
        capacity.read(path)


def test_the_atomic_writer_leaves_no_temporary_file_and_reads_back(tmp_path):
    data = {"schema": "x/1.0", "nested": {"n": [1, 2.5, None]}, "text": "é"}
    path = jsontypes.write_json_file(tmp_path / "deeper" / "file.json", data)
    assert [p.name for p in path.parent.iterdir()] == ["file.json"]
    assert json.loads(Path(path).read_text(encoding="utf-8")) == data
