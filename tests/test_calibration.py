"""One Calibration (issue 51 item 4): the class the load stage fits against the server is the
class results.json's setup holds, and its saved form (`saved()`) reads back equal."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

from benchy.client.client import Client
from benchy.client.settings import ClientSettings
from benchy.load import calibration as calibration_mod
from benchy.load import prompts
from benchy.load.calibration import Calibration, LengthCheck
from benchy.load.lengths import PromptLengths, fit_lengths
from benchy.results import setup as setup_mod
from benchy.results import types as results_types
from tests.conftest import SimSince, run_json, shared_sim

PACKAGE = Path(__file__).resolve().parents[1] / "benchy"

sim_shared = shared_sim()


def _classes_named(name: str) -> list[str]:
    """The modules that define a class `name`, read as text: ast.parse here met CPython 3.11's
    "AST constructor recursion depth mismatch" in CI (an import compiling in the shared sim's
    thread at the same moment), and a class statement is one line to find."""
    statement = re.compile(rf"^\s*class {name}\b", re.MULTILINE)
    return [
        str(path.relative_to(PACKAGE.parent))
        for path in sorted(PACKAGE.rglob("*.py"))
        for _ in statement.finditer(path.read_text(encoding="utf-8"))
    ]


def test_each_calibration_type_is_one_class_owned_by_the_load_stage():
    """Before: load/prompts.Calibration (overhead, a dict length_check, LengthFit) and
    results/setup.Calibration (overhead_tokens, LengthCheck, PromptLengths), one turned into a
    dict to be parsed into the other."""
    for name in ("Calibration", "LengthCheck", "PromptLengths"):
        assert len(_classes_named(name)) == 1, (name, _classes_named(name))
    assert _classes_named("Calibration") == ["benchy/load/calibration.py"]
    assert prompts.Calibration is setup_mod.Calibration is results_types.Calibration is Calibration
    assert results_types.LengthCheck is calibration_mod.LengthCheck
    assert results_types.PromptLengths is PromptLengths


def _fitted(base_url: str, longest: int) -> Calibration:
    """The run's calibration, made as `benchy run` makes it: lengths fitted, the line fitted,
    the longest prompt checked (real HTTP against the simulator)."""

    async def go() -> Calibration:
        async with Client(ClientSettings(base_url=base_url)) as client:
            await client.choose_model()
            fit = await fit_lengths(client, None)
            found = await prompts.calibrate(client, "chat", "t", lengths=fit)
            return await prompts.check_length(client, "chat", found, "t", longest)

    return asyncio.run(go())


def test_the_fitted_calibration_is_the_saved_one_and_reads_back_equal(sim_shared):
    sim = SimSince(sim_shared)
    cal = _fitted(sim.base_url, longest=3000)
    # typed from the start: the server's count of the longest prompt, as the sim counted it
    assert isinstance(cal.length_check, LengthCheck)
    # the check is the last request, and the only one past the calibration prompts: its truth line
    # may be written just after its answer went out, so one more is waited for if it is not there
    truth = sim.truth()
    if not truth or (truth[-1].get("prompt_tokens") or 0) < 2000:
        truth = sim.truth(expect=len(truth) + 1)
    assert cal.length_check.server_tokens == truth[-1]["prompt_tokens"]
    assert cal.length_check.target_tokens == 3000 and cal.length_check.missed is False
    assert cal.lengths is not None and cal.lengths.one_token  # the live run's words, one token each
    saved = cal.saved()
    assert type(saved) is Calibration and saved.lengths is not None
    assert saved.lengths.words == len(cal.lengths.one_token) and saved.lengths.one_token is None
    assert saved.overhead_tokens == round(cal.overhead_tokens, 2)
    back = Calibration.from_dict(json.loads(json.dumps(saved.to_dict())), strict=True)
    assert back == saved


def test_a_runs_setup_holds_the_calibration_its_prompts_were_made_with(sim_shared, tmp_path):
    """results.json's setup.calibration is the saved form of what this same server fits now
    (the simulator counts every prompt alike: the same fit, the same words)."""
    sim = SimSince(sim_shared)
    results = run_json(sim, tmp_path, "--pp", "64", "--tg", "8", "--requests", "2")
    saved = _fitted(sim.base_url, longest=64).saved()
    assert Calibration.from_dict(results["setup"]["calibration"], strict=True) == saved
    assert results["setup"]["calibration"] == saved.to_dict()
