"""Scenario files and sweeps: the shipped ones load, bad ones fail with one line naming the file."""
import pytest

from benchy.scenario import Case, ScenarioError, load_scenario, shipped_names, sweep


def test_shipped_scenarios_match_the_field_report():
    assert {"chat_short", "code_generation", "chat_long_context", "summarization", "llama_bench"} <= set(shipped_names())
    expected = {"chat_short": (167, 256), "code_generation": (420, 1024),
                "chat_long_context": (5434, 256), "summarization": (10770, 128)}
    for name, (pp, tg) in expected.items():
        (case,) = load_scenario(name)
        assert (case.pp, case.tg, case.scenario) == (pp, tg, name)


def test_llama_bench_is_the_full_grid():
    cases = load_scenario("llama_bench")
    assert [(c.pp, c.tg) for c in cases] == [(512, 32), (512, 128), (2048, 32), (2048, 128), (8192, 32), (8192, 128)]


def test_labels_are_llama_bench_style():
    assert Case(512, 32).label == "pp512 tg32"
    assert Case(512, 32, concurrency=4).label == "pp512 tg32 c4"
    assert Case(512, 32, depth=4096).label == "pp512 tg32 @ d4096"


def test_sweep_rejects_zero():
    with pytest.raises(ScenarioError, match="--pp must be whole numbers ≥ 1"):
        sweep([0], [32], [1])


@pytest.mark.parametrize("text, message", [
    ("pp = 10\ntg = [", "invalid TOML"),
    ("tg = 5", "missing 'pp'"),
    ("pp = 'ten'\ntg = 5", "pp must be a whole number"),
    ("pp = 1\ntg = 5\nfoo = 1", "unknown key 'foo'"),
    ("pp = 1\ntg = 5\nendpoint = 'x'", "endpoint must be one of"),
])
def test_bad_files_name_the_file_in_one_line(tmp_path, text, message):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(ScenarioError) as info:
        load_scenario(str(path))
    assert message in str(info.value) and str(path) in str(info.value)
    assert "\n" not in str(info.value)


def test_unknown_name_lists_shipped():
    with pytest.raises(ScenarioError, match="chat_short"):
        load_scenario("nope")
