"""results.json against the JSON Schema generated from the typed results, and the version policy."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from benchy.records import REQUESTS_SCHEMA, RecordsError, read_records
from benchy.results import files as results_files
from benchy.results import types as results_mod
from tests.conftest import REPO_ROOT, run_benchy_here

SHIPPED_REPORTS = sorted((REPO_ROOT / "reports").glob("*/results.json"))


def validator() -> jsonschema.protocols.Validator:
    schema = json.loads(results_files.SCHEMA_FILE.read_text(encoding="utf-8"))
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def test_shipped_schema_is_generated_from_the_classes():
    shipped = json.loads(results_files.SCHEMA_FILE.read_text(encoding="utf-8"))
    assert shipped == results_files.json_schema(), "stale: run `make schema` (results.write_schema())"
    assert shipped["$id"] == results_mod.SCHEMA


@pytest.mark.parametrize("path", SHIPPED_REPORTS, ids=lambda p: p.parent.name)
def test_every_shipped_example_report_validates_and_loads(path):
    data = json.loads(path.read_text(encoding="utf-8"))
    validator().validate(data)
    loaded = results_files.load(path)
    validator().validate(loaded)
    assert loaded["schema"] == results_mod.SCHEMA and len(loaded["cases"]) == len(data["cases"])
    assert [c["summary"] for c in loaded["cases"]] == [c["summary"] for c in data["cases"]]


def test_a_fresh_run_validates_and_starts_its_request_log_with_a_header(start_sim, tmp_path):
    """Open loop, goodput, a ceiling and a buffered stream: most optional parts of the file."""
    sim = start_sim("--prefill-tps", "4000", "--decode-tps", "400", "--tokens-per-event", "6")
    out = tmp_path / "out"
    args = ["--pp", "64", "--tg", "16", "--rate", "20", "--requests", "4", "--warmup", "1", "--quiet"]
    args += ["--slo", "e2e=5s", "--hardware", "gb10", "--model-profile", "gpt-oss-120b"]
    proc = run_benchy_here("run", "--base-url", sim.base_url, "--output", str(out), "--no-report", *args)
    assert proc.returncode in (0, 3, 4), proc.stderr
    data = json.loads((out / "results.json").read_text(encoding="utf-8"))
    validator().validate(data)
    (case,) = data["cases"]
    assert data["schema"] == results_mod.SCHEMA and case["goodput"]["fraction"] is not None
    assert case["unavailable_codes"]["ttft_s"] == "buffered" and case["ceiling"]["tokens_per_s"] > 0
    first = json.loads((out / "requests.jsonl").read_text(encoding="utf-8").splitlines()[0])
    assert first["schema"] == REQUESTS_SCHEMA
    assert len(list(read_records(out / "requests.jsonl"))) == case["n_ok"] + case["n_failed"] + case["n_warmup"]


# ------------------------------------------------------------------ version policy


def write(tmp_path: Path, data: dict) -> Path:
    path = tmp_path / "results.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def example() -> dict:
    return json.loads(SHIPPED_REPORTS[0].read_text(encoding="utf-8"))


@pytest.mark.parametrize(
    "schema", ["benchy/results/1", "benchy/results/1.0", f"benchy/results/1.{results_mod.SCHEMA_MINOR}"]
)
def test_any_minor_of_this_major_loads(tmp_path, schema):
    loaded = results_files.load(write(tmp_path, {**example(), "schema": schema}))
    assert loaded["schema"] == results_mod.SCHEMA


@pytest.mark.parametrize(
    "schema, needle",
    [
        ("benchy/results/2.0", "major version 2"),
        ("benchy/results/0", "major version 0"),
        (f"benchy/results/1.{results_mod.SCHEMA_MINOR + 1}", "newer than this benchy"),
        ("benchy/probe/1", "not a benchy results schema"),
        (None, "not a benchy results schema"),
    ],
)
def test_other_versions_fail_with_one_line(tmp_path, schema, needle):
    with pytest.raises(results_files.ResultsError) as err:
        results_files.load(write(tmp_path, {**example(), "schema": schema}))
    assert needle in str(err.value) and "\n" not in str(err.value)


def test_a_malformed_file_names_the_field(tmp_path):
    data = example()
    data["cases"][0]["pp"] = "512"
    with pytest.raises(results_files.ResultsError, match=r"malformed: cases\[0\]\.pp: expected an integer"):
        results_files.load(write(tmp_path, data))


def test_old_reason_strings_get_their_code_once_at_load():
    case = results_mod.CaseResult(
        label="x", pp=1, tg=1, concurrency=1, unavailable={"ttft_s": "SSE buffering: 30 tokens arrived in 2 events"}
    )
    assert case.reason("ttft_s").code == "buffered"
    assert case.reason("itl_s").code == "legacy" and case.reason("itl_s").message == "not measured"


def test_request_logs_without_a_header_are_read_and_other_majors_refused(tmp_path):
    record = {"case": "c", "run": 0, "index": 0, "warmup": False, "request_id": "r", "nonce": None}
    record |= {"target_prompt_tokens": 1, "target_output_tokens": 1}
    old = tmp_path / "old.jsonl"
    old.write_text(json.dumps(record) + "\n", encoding="utf-8")
    assert [r.request_id for r in read_records(old)] == ["r"]
    newer = tmp_path / "newer.jsonl"
    newer.write_text(json.dumps({"schema": "benchy/requests/3.0"}) + "\n" + json.dumps(record) + "\n", encoding="utf-8")
    with pytest.raises(RecordsError, match="reads benchy/requests/1.x and benchy/requests/2.x only"):
        list(read_records(newer))


# ------------------------------------------------------------------ typed all the way down


def free_form_places(schema: dict) -> set[str]:
    """`Class.field` of every property whose value may be any JSON object (no properties named,
    nor a typed map): a reader of such a field can only guess."""

    def free(prop: dict) -> bool:
        if "anyOf" in prop:
            return any(free(p) for p in prop["anyOf"])
        if prop.get("type") == "array":
            return free(prop.get("items", {}))
        if prop.get("type") == "object" and "properties" not in prop:
            return prop.get("additionalProperties", {}) in ({}, True) or free(prop["additionalProperties"])
        return prop == {} or {k for k in prop if k != "description"} == set()

    return {
        f"{name}.{field}"
        for name, cls in schema["$defs"].items()
        for field, prop in cls.get("properties", {}).items()
        if free(prop)
    }


def test_every_object_in_results_names_its_properties():
    """Every object benchy writes has a class, so the schema says what it holds; the objects
    left free are llama.cpp's own `timings`, kept verbatim, and the user's own --extra-body and
    --tools (function definitions, each its own JSON schema)."""
    free = {"RequestResult.server_timings", "Setup.extra_body", "Setup.tools"}
    assert free_form_places(results_files.json_schema()) == free


def old_shapes() -> dict:
    """The example report with the objects of files before 1.12 as they were written."""
    data = example()
    case = data["cases"][0]
    case["server"] = {"unavailable": "the case was cut short before its last snapshot"}
    case["cache_reset"] = {"ok": False, "endpoint": None, "message": "no reset endpoint"}
    case["requests"][0]["anomalies"] = ["malformed_events:2", "no_done"]
    data["setup"]["cache_reset"] = {"endpoint": None, "ok": False, "message": "no reset endpoint"}
    client = {k: v for k, v in case["client"].items() if k != "per_worker"}
    data["warnings"] = [
        {"code": "client_overloaded", "case": case["label"], "message": "m", "details": client},
        {"code": "output_length_mismatch", "case": case["label"], "details": {"asked": 8, "delivered_median": 5}},
    ]
    return data


def test_old_shapes_of_the_objects_now_typed_still_load(tmp_path):
    run = results_files.read(write(tmp_path, old_shapes()))
    case = run.cases[0]
    assert isinstance(case.server, results_mod.NoServerFigures) and case.server_figures() is None
    assert case.cache_reset is not None and not case.cache_reset.ok and case.cache_reset.calls == 0
    assert case.requests[0].anomalies == ["malformed_events:2", "no_done"]  # kept as written
    assert run.setup.calibration is not None and run.setup.calibration.overhead_tokens == 36.0
    length = run.setup.calibrations["chat"].length_check
    assert length is not None and length.server_tokens == length.target_tokens and not length.missed
    assert run.setup.server is not None and run.setup.server.context_length == 131072
    overloaded, short = run.warnings
    assert overloaded.details.client is None  # its figures were flat: the case's client keeps them
    assert short.details.delivered_median == 5 and short.details.asked == 8
    assert case.client is not None and case.client.per_worker[0].clock is not None
    validator().validate(run.to_dict())


@pytest.mark.parametrize("module", ["results.files", "results.probe", "results.capacity"])
def test_each_shipped_schema_is_the_file_its_writer_writes(module, tmp_path):
    """Byte for byte: the three writers share one layout, so a regenerated schema shows in a
    diff only where its types changed."""
    import importlib

    writer = importlib.import_module(f"benchy.{module}")
    written = writer.write_schema(tmp_path / "schema.json")
    assert written.read_bytes() == writer.SCHEMA_FILE.read_bytes()
