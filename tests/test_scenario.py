"""Scenario files and sweeps: the shipped ones load, bad ones fail with one line naming the file."""

import json

import pytest

from benchy.cli import main
from benchy.load import arrivals
from benchy.workloads.case import Case, ScenarioError
from benchy.workloads.scenario import load_scenario, rate_sweep, select_cases, shipped_names, sweep
from benchy.workloads.selection import CaseSelection
from tests.conftest import run_benchy_here


def test_shipped_scenarios_match_the_field_report():
    assert {"chat_short", "code_generation", "chat_long_context", "summarization", "llama_bench"} <= set(
        shipped_names()
    )
    expected = {
        "chat_short": (167, 256),
        "code_generation": (420, 1024),
        "chat_long_context": (5434, 256),
        "summarization": (10770, 128),
    }
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


@pytest.mark.parametrize(
    "text, message",
    [
        ("pp = 10\ntg = [", "invalid TOML"),
        ("tg = 5", "missing 'pp'"),
        ("pp = 'ten'\ntg = 5", "pp must be a whole number"),
        ("pp = 1\ntg = 5\nfoo = 1", "unknown key 'foo'"),
        ("pp = 1\ntg = 5\nendpoint = 'x'", "endpoint must be one of"),
    ],
)
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


# ---------------------------------------------------------------- `rate`: open-loop cases from a scenario


def _scenario(tmp_path, text: str, name: str = "load.toml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_scenario_rate_makes_the_cases_rate_would(tmp_path):
    (case,) = load_scenario(str(_scenario(tmp_path, "name = 'r'\npp = 64\ntg = 8\nrate = 4\n")))
    assert (case.label, case.rate, case.concurrency, case.scenario) == ("pp64 tg8 r4", 4.0, 1, "r")
    path = _scenario(tmp_path, "name = 'r'\npp = [64, 128]\ntg = 8\nrate = [2, 4.5]\ndepth = 256\n")
    cases = load_scenario(str(path))
    assert [c.label for c in cases] == [
        "pp64 tg8 r2 @ d256",
        "pp64 tg8 r4.5 @ d256",
        "pp128 tg8 r2 @ d256",
        "pp128 tg8 r4.5 @ d256",
    ]
    assert cases == rate_sweep([64, 128], [8], [2, 4.5], [256], scenario="r")


@pytest.mark.parametrize("value", ["0", "-1", "'4'", "true", "[]", "[2, 0]", "inf", "nan", "[2, '4']"])
def test_bad_scenario_rate_names_the_file_line_and_key(tmp_path, value):
    path = _scenario(tmp_path, f"pp = 64\ntg = 8\nrate = {value}\n")
    with pytest.raises(ScenarioError) as info:
        load_scenario(str(path))
    assert str(info.value).startswith(f"{path}:3: rate must be a positive number") and "\n" not in str(info.value)


def test_scenario_rate_with_concurrency_is_refused(tmp_path):
    path = _scenario(tmp_path, "pp = 64\ntg = 8\nconcurrency = 2\nrate = 4\n")
    with pytest.raises(ScenarioError, match=r":4: rate and concurrency cannot be combined"):
        load_scenario(str(path))


def _cli_error(capsys, *argv: str) -> tuple[int, str]:
    """The real entry point in-process: (exit code, the whole of stderr)."""
    with pytest.raises(SystemExit) as done:
        main(["run", "--base-url", "http://127.0.0.1:9/v1", *argv])
    return done.value.code, capsys.readouterr().err


@pytest.mark.parametrize(
    "text, words",
    [
        ("pp = 64\ntg = 8\nrate = 0\n", "rate must be a positive number"),
        ("pp = 64\ntg = 8\nrate = -2.5\n", "rate must be a positive number"),
        ("pp = 64\ntg = 8\nrate = 'fast'\n", "rate must be a positive number"),
        ("pp = 64\ntg = 8\nrate = false\n", "rate must be a positive number"),
        ("pp = 64\ntg = 8\nrate = 4\nconcurrency = [1, 4]\n", "rate and concurrency cannot be combined"),
    ],
)
def test_bad_scenario_rate_is_one_line_exit_2(tmp_path, capsys, text, words):
    path = _scenario(tmp_path, text)
    code, err = _cli_error(capsys, "--scenario", str(path))
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert err.startswith(f"benchy: error: {path}:") and words in err


class _Planned(BaseException):
    """Raised by the stand-in for run.execute: the settings the CLI built are what is checked."""


@pytest.fixture
def planned(monkeypatch, tmp_path):
    """planned(toml_text, *flags) -> the RunSettings `benchy run --scenario FILE *flags` would execute."""
    from benchy import run as run_mod

    def fake_execute(settings):
        raise _Planned(settings)

    monkeypatch.setattr(run_mod, "execute", fake_execute)

    def plan(text: str, *flags: str):
        path = _scenario(tmp_path, text)
        with pytest.raises(_Planned) as info:
            main(["run", "--base-url", "http://127.0.0.1:9/v1", "--scenario", str(path), *flags])
        return info.value.args[0]

    return plan


RATE_2_4 = "name = 's'\npp = 64\ntg = 8\nrate = [2, 4]\n"


def test_scenario_rate_reaches_the_run_and_takes_max_inflight(planned):
    settings = planned(RATE_2_4, "--max-inflight", "3")
    assert [c.label for c in settings.cases] == ["pp64 tg8 r2", "pp64 tg8 r4"]
    assert settings.load.max_inflight == 3 and settings.load.streams(settings.cases[0]) == 3


@pytest.mark.parametrize(
    "text, flags, labels",
    [
        (RATE_2_4, ("--rate", "8"), ["pp64 tg8 r8"]),  # --rate wins, and makes each case once
        (RATE_2_4, ("-c", "4"), ["pp64 tg8 c4"]),  # so does --concurrency: a closed loop
        (RATE_2_4, ("--depth", "256"), ["pp64 tg8 r2 @ d256", "pp64 tg8 r4 @ d256"]),  # --depth keeps the rate
        (RATE_2_4, ("--pp", "32"), ["pp64 tg8 r2", "pp64 tg8 r4", "pp32 tg128"]),  # a sweep beside it
        ("pp = 64\ntg = 8\nconcurrency = [1, 4]\n", ("--rate", "2"), ["pp64 tg8 r2"]),
    ],
)
def test_command_line_and_scenario_rate_combine(planned, text, flags, labels):
    assert [c.label for c in planned(text, *flags).cases] == labels


@pytest.mark.parametrize(
    "chosen, labels",
    [
        (CaseSelection(), ["pp512 tg128"]),  # nothing asked: the default case
        (
            CaseSelection(pp=(64, 32), tg=(8,), concurrency=(1, 4)),
            ["pp64 tg8", "pp64 tg8 c4", "pp32 tg8", "pp32 tg8 c4"],
        ),
        (CaseSelection(scenarios=("chat_short",), concurrency=(2,)), ["pp167 tg256 c2"]),  # a scenario re-swept
        (CaseSelection(scenarios=("chat_short",), rate=(1, 2, 2)), ["pp167 tg256 r1", "pp167 tg256 r2"]),
        (CaseSelection(pp=(64,), tg=(8,), depth=(0, 256), depth_mode="cached"), ["pp64 tg8", "pp64 tg8 @ d256 cached"]),
    ],
)
def test_select_cases_from_scenarios_and_sweep_flags(chosen, labels):
    assert [c.label for c in select_cases(chosen)] == labels


def test_select_cases_refuses_rate_with_concurrency():
    with pytest.raises(ScenarioError, match="--rate and --concurrency cannot be combined"):
        select_cases(CaseSelection(pp=(64,), rate=(2,), concurrency=(4,)))


def test_max_inflight_without_any_rate_case_is_refused(tmp_path, capsys):
    path = _scenario(tmp_path, RATE_2_4)
    code, err = _cli_error(capsys, "--scenario", str(path), "-c", "4", "--max-inflight", "2")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "needs --rate" in err


def test_scenario_rate_runs_open_loop_against_the_simulator(start_sim, tmp_path):
    """End to end: the server sees the scenario's Poisson schedule, and results record it."""
    sim = start_sim("--preset", "instant")
    path = _scenario(tmp_path, "name = 'open'\npp = 64\ntg = 4\nrate = 40\n")
    out = tmp_path / "out"
    proc = run_benchy_here(
        "run",
        "--base-url",
        sim.base_url,
        *"--quiet --requests 30 --warmup 0 --max-inflight 8".split(),
        "--scenario",
        str(path),
        "--output",
        str(out),
    )
    assert proc.returncode == 0, proc.stderr
    results = json.loads((out / "results.json").read_text())
    (case,) = results["cases"]
    assert (case["label"], case["scenario"], case["mode"], case["rate"]) == ("pp64 tg4 r40", "open", "open", 40)
    assert case["n_ok"] == 30 and results["setup"]["load"]["max_inflight"] == 8
    ids = {r["request_id"] for r in case["requests"] if not r["warmup"]}  # not the three sent alone first
    arrived = sorted(t["arrival_s"] for t in sim.truth(expect=len(ids)) if t["request_id"] in ids)
    assert len(arrived) == 30
    served_rate = (len(arrived) - 1) / (arrived[-1] - arrived[0])
    offsets = arrivals.arrival_offsets(30, 40.0, 0)  # --seed 0 + case index 0
    assert case["achieved_rate"] == pytest.approx(served_rate, rel=0.05)
    assert case["achieved_rate"] == pytest.approx(29 / (offsets[-1] - offsets[0]), rel=0.05)
