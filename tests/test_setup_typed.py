"""Issue 51 item 4: one typed Setup, built in phases, no dict on the way.

The run's setup was made as a dict (load/run_setup.py), parsed with `Setup.from_dict(strict=True)`
(an unknown key: a field someone forgot), turned back into a dict by the analysis and parsed
again by `run_result` (now `run_view`). Now run_setup.py builds the Setup itself (mypy checks every field), the
run adds its phases by `replace`, and the analysis hands the manifest's Setup and Stopped to
`run_result` as they are: the saved form is made only when a file is written.
"""

from __future__ import annotations

import ast
import json

from benchy.analysis.bundle import read_manifest
from benchy.load.calibration import Calibration
from benchy.load.images import ImageSettings
from benchy.load.lengths import PromptLengths
from benchy.load.plan import LoadSettings
from benchy.measure.ceiling import CeilingSetup
from benchy.results import build as results_build
from benchy.results import types as results_mod
from benchy.results.setup import LoadSetup, Setup
from tests.conftest import REPO_ROOT, run_benchy_here, shared_sim
from tests.test_flow import case_of

sim_shared = shared_sim("--preset", "instant")


def test_run_result_takes_the_typed_setup_and_stopped_as_they_are():
    """run_result holds the very Setup and Stopped it is given (no copy through a dict), reads
    the prompt nonce, each case's length method and its ceiling from them, and the result's
    saved form reads back, strictly, as the same Setup."""
    cal = Calibration(overhead_tokens=3.0, method="usage", lengths=PromptLengths(method="server_usage", words=40))
    setup = Setup(
        model="m",
        prompt_nonce=False,
        calibration=cal,
        calibrations={"chat": cal},
        ceiling=CeilingSetup(bandwidth_gbs=10.0, active_bytes_per_token=1e9),  # 10 tokens/s
        load=LoadSetup(requests=3, seed=7),
    )
    stopped = results_mod.Stopped("SIGINT", "interrupted (Ctrl-C)")
    run = results_build.run_view(setup, [case_of(16, 0.05)], partial=True, stopped=stopped, version="t").result([])
    assert run.setup is setup and run.stopped is stopped
    assert run.prompt_nonce is False
    (case,) = run.cases
    assert case.prompt_lengths == "server_usage"
    assert case.ceiling is not None and case.ceiling.tokens_per_s == 10.0
    saved = json.loads(json.dumps(run.to_dict()))
    assert results_mod.RunResult.from_dict(saved, strict=True).setup == setup


def test_a_live_runs_setup_is_built_typed_and_saved_as_built(sim_shared, tmp_path):
    """`benchy run` with the flags that fill the setup's parts (real HTTP against the simulator):
    the manifest's setup is the one results.json holds, reads back strictly as itself, and each
    part is what its owner's `saved()` makes of the flags (the load stage's LoadSetup, the
    redacted --extra-body, the ceiling's hardware, the calibration of the main endpoint)."""
    out = tmp_path / "run"
    flags = ["--pp", "64", "--tg", "4", "--requests", "2", "--duration", "30", "--drain", "1", "--seed", "7"]
    flags += ["--slo", "ttft=0.5", "--images", "1", "--image-size", "32x32", "--shared-images"]
    flags += ["--hardware", "gb10", "--stop", "<|call|>", "--tools", "builtin", "--tool-choice", "auto"]
    flags += ["--extra-body", '{"api_key": "s3cret", "top_k": 5}']
    proc = run_benchy_here("run", "--base-url", sim_shared.base_url, "-q", "--no-report", "-o", str(out), *flags)
    assert proc.returncode == 0, proc.stderr
    saved = json.loads((out / "manifest.json").read_text())["setup"]
    assert json.loads((out / "results.json").read_text())["setup"] == saved
    setup = read_manifest(out).setup
    assert Setup.from_dict(saved, strict=True) == setup and setup.to_dict() == saved
    images = ImageSettings(count=1, width=32, height=32, shared=True)
    load = LoadSettings(requests=2, duration_s=30.0, drain_s=1.0, seed=7, slo={"ttft_s": 0.5}, images=images)
    assert setup.load == load.saved()
    assert setup.extra_body == {"api_key": "***", "top_k": 5}  # the secret never written
    assert "s3cret" not in (out / "manifest.json").read_text()
    assert setup.tools and setup.tool_choice == "auto" and setup.stop == ["<|call|>"]
    assert setup.hardware == "gb10" and setup.ceiling is not None and setup.ceiling.hardware == "gb10"
    assert isinstance(setup.calibration, Calibration) and setup.calibration == setup.calibrations["chat"]


# Calls that make a typed model from a dict with strict=True (an unknown key: a field someone
# forgot), left where a file is written and read back to prove it reads: each with why.
STRICT_READS_LEFT = {
    "benchy/results/capacity.py",  # capacity.json as written must read back
    "benchy/results/probe.py",  # probe.json as written must read back
}


def _strict_parses(source: str) -> list[str]:
    """`X.from_dict(…, strict=True)`, `from_json(…, strict=True)` and any `Setup.from_dict(…)`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        name, owner = node.func.attr, node.func.value
        strict = any(k.arg == "strict" and getattr(k.value, "value", False) is True for k in node.keywords)
        if name in ("from_dict", "from_json") and strict:
            found.append(f"{name} strict")
        elif name == "from_dict" and isinstance(owner, ast.Name) and owner.id.endswith("Setup"):
            found.append(f"{owner.id}.from_dict")
        elif name == "from_dict" and isinstance(owner, ast.Attribute) and owner.attr.endswith("Setup"):
            found.append(f"{owner.attr}.from_dict")
    return found


def test_no_setup_is_parsed_back_from_a_dict_inside_the_run():
    """The setup (and the client figures) travel typed from the stage that makes them to the
    result: nothing in benchy/ parses a Setup from a dict, and a strict parse (the old safety
    for a forgotten field, now mypy's) is left only where a written file is checked."""
    sample = "Setup.from_dict(d, strict=True)\nresults_mod.Setup.from_dict(d)\nX.from_dict(d)\nf(strict=True)"
    assert _strict_parses(sample) == ["from_dict strict", "Setup.from_dict"]
    found = {
        str(path.relative_to(REPO_ROOT)): parses
        for path in sorted((REPO_ROOT / "benchy").rglob("*.py"))
        if (parses := _strict_parses(path.read_text(encoding="utf-8")))
    }
    assert set(found) - STRICT_READS_LEFT == set(), found
    assert STRICT_READS_LEFT <= set(found), f"paid off: strike {sorted(STRICT_READS_LEFT - set(found))}"
