"""`sim2real loop` end to end at the minimal budget, as a user runs it (a subprocess, real everything):
Ctrl-C in the middle leaves a resumable state, the re-run finishes without redoing finished stages, the report
holds every stage's verdict and figures, and a third run has nothing left to do."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from sim2real.loop.stages import STAGE_NAMES
from tests.rlhf_helpers import minimal_run

REPO = Path(__file__).resolve().parents[1]


def _loop(out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "sim2real", "loop", "--budget", "minimal", "--out", str(out), *extra]


def _state(out: Path) -> dict:
    path = out / "loop.json"
    return json.loads(path.read_text()) if path.is_file() else {"stages": {}}


def _env() -> dict:
    from tests.ros_helpers import ros_env

    # a DDS domain of its own: the loop's nodes must never answer another test's service calls
    return {**ros_env(own=True), "PYTHONPATH": str(REPO)}


def test_loop_interrupted_resumed_reported(tmp_path):
    out = tmp_path / "loop"
    # the instruction stage's pipeline resumes the session's finished minimal run (the same robot, budget, engine
    # and sources; tests/test_rlhf_pipeline.py runs it and its resume): its stages are not trained a second time
    shutil.copytree(Path(minimal_run()["model_dir"]).parent, out / "instruction")
    log = open(tmp_path / "first.log", "w")  # noqa: SIM115 - the subprocess writes it
    # 1. Ctrl-C (SIGINT to the process group, as a terminal sends it) after the campaign gate: in the instruction
    # stage or in the deploy stage's ROS nodes
    first = subprocess.Popen(
        _loop(out), cwd=REPO, env=_env(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    try:
        deadline = time.monotonic() + 420
        while "validate" not in _state(out)["stages"]:
            assert first.poll() is None, (tmp_path / "first.log").read_text()[-2000:]
            assert time.monotonic() < deadline, "the loop did not reach the campaign gate in time"
            time.sleep(1)
        assert _state(out)["stages"]["validate"]["result"]["verdict"] == "pass", _state(out)["stages"]["validate"]
        time.sleep(5)  # into the next stages' work
        os.killpg(first.pid, signal.SIGINT)
        # at once, or at the latest when the running stage ends (a library may swallow the KeyboardInterrupt)
        assert first.wait(timeout=400) == 130, (tmp_path / "first.log").read_text()[-2000:]
    finally:
        if first.poll() is None:  # never leave the loop's ROS nodes running into other tests
            os.killpg(first.pid, signal.SIGKILL)
            first.wait()
    interrupted = _state(out)
    assert list(interrupted["stages"]) in (STAGE_NAMES[:3], STAGE_NAMES[:4])
    assert not interrupted["finished"]
    assert "interrupted" in (tmp_path / "first.log").read_text()

    # 2. the same command resumes after the last finished stage and runs to the end
    second = subprocess.run(_loop(out), cwd=REPO, env=_env(), capture_output=True, text=True, timeout=900)
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    state = _state(out)
    assert state["finished"] and list(state["stages"]) == STAGE_NAMES
    for name in interrupted["stages"]:  # not redone: the records are the interrupted run's
        assert state["stages"][name] == interrupted["stages"][name]
    assert "1/8 train" not in second.stdout and "5/8 deploy" in second.stdout
    assert len(list((out / "train").glob("*/*/checkpoints"))) == 1  # one training run, not a second one
    for name in STAGE_NAMES:
        assert state["stages"][name]["result"]["verdict"] in ("pass", "warn", "skipped"), (name, state["stages"][name])

    # 3. the report: every stage's verdict and key figure, the plots, the embedded state
    report = (out / "report.html").read_text()
    embedded = json.loads(re.search(r'id="loop-state">(.*?)</script>', report, re.S).group(1).replace("<\\/", "</"))
    assert embedded["stages"] == state["stages"]
    for name, s in state["stages"].items():
        assert f"<b>{name}</b>" in report and s["result"]["verdict"].upper() in report
        assert s["result"]["figure"].replace("&", "&amp;").replace("<", "&lt;")[:40] in report
    assert report.count("data:image/png;base64,") >= 4  # training curves, heatmaps, instruction, field KPIs
    assert "not run yet" not in report
    deploy, final = state["stages"]["deploy"]["result"]["data"], state["stages"]["final"]["result"]["data"]
    assert deploy["samples"] > 0 and list((out / "field_logs").rglob("*.mcap"))
    assert final["artifact"]  # the artifact in service was deployed again and measured

    # 4. a finished run has nothing left to do
    third = subprocess.run(_loop(out), cwd=REPO, env=_env(), capture_output=True, text=True, timeout=120)
    assert third.returncode == 0 and "/8 " not in third.stdout
    assert _state(out)["stages"] == state["stages"]


def test_loop_refuses_bad_input_in_one_line(tmp_path):
    out = tmp_path / "loop"
    missing = subprocess.run(
        _loop(out, "--field-twin", str(tmp_path / "nope.yaml")),
        cwd=REPO,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert missing.returncode == 2 and "nope.yaml" in missing.stderr and "Traceback" not in missing.stderr
    out.mkdir()
    (out / "loop.json").write_text(json.dumps({"config": {"robot": "rover", "budget": "quick"}, "stages": {}}))
    other = subprocess.run(_loop(out), cwd=REPO, env=_env(), capture_output=True, text=True, timeout=60)
    assert other.returncode == 2 and "budget='quick'" in other.stderr and "Traceback" not in other.stderr


def test_each_robot_meets_its_own_field_twin():
    from sim2real.loop.config import LoopConfig

    assert Path(LoopConfig(robot="quadruped", out="-").field_twin).name == "field_robot_hard_quadruped.yaml"
    assert Path(LoopConfig(robot="rover", out="-").field_twin).name == "field_robot_hard.yaml"  # the default
    assert LoopConfig(robot="quadruped", out="-", field_twin="mine.yaml").field_twin == "mine.yaml"


def test_every_loop_setting_is_a_flag_with_the_configs_help():
    """`sim2real loop` builds its flags from LoopConfig: each setting is one, with the field's own help."""
    import dataclasses

    from sim2real.loop.config import LoopConfig

    out = subprocess.run(
        [sys.executable, "-m", "sim2real", "loop", "--help"], cwd=REPO, env=_env(), capture_output=True, text=True
    )
    text = " ".join(out.stdout.split())
    for f in dataclasses.fields(LoopConfig):
        assert f"--{f.name.replace('_', '-')}" in text, f.name
        assert " ".join(f.metadata["help"].split()) in text or f.name in ("out", "until"), f.name
