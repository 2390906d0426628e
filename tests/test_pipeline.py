"""The one Stage runner (sim2real.pipeline) on tiny stages: resume, failures, fresh directories, early stop, Ctrl-C
and SIGTERM a library swallows, atomic state, progress and budgets. Real files, real signals, no mocks."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from sim2real.errors import UserError
from sim2real.pipeline import MARKER, TRACE, Budget, Pipeline, Stage, StageError

REPO = Path(__file__).resolve().parents[1]


@dataclass
class Made:
    where: Path
    n: int


def _calls(ctx) -> list[str]:
    return ctx.config["calls"]


def first(ctx):
    _calls(ctx).append("first")
    return Made(ctx.out / "thing", 1)  # a dataclass with a path: later stages see it as it reads back from JSON


def second(ctx):
    _calls(ctx).append("second")
    if ctx.config.get("fail") == "user":
        raise UserError("the input is wrong")
    if ctx.config.get("fail") == "bug":
        raise RuntimeError("a bug")
    return {"from_first": ctx.results["first"], "settings": ctx.settings}


def third(ctx):
    _calls(ctx).append("third")
    return sorted(ctx.results)


THREE = Pipeline("tiny", (Stage("first", first, "one"), Stage("second", second, "two"), Stage("third", third, "3")))


def test_resume_skips_finished_stages(tmp_path):
    config = {"calls": []}
    budget = Budget("b", {"second": {"size": 3}})
    run = THREE.open(tmp_path).execute(config, budget)
    assert config["calls"] == ["first", "second", "third"] and run.finished and run.passed == THREE.names
    assert run.results["second"] == {"from_first": {"where": str(tmp_path / "thing"), "n": 1}, "settings": {"size": 3}}
    assert run.results["third"] == ["first", "second"]
    state = json.loads((tmp_path / "tiny.json").read_text())
    assert list(state["stages"]) == THREE.names and state["finished"]
    assert all(isinstance(r["seconds"], float) for r in state["stages"].values())

    notes = []
    again = THREE.open(tmp_path).execute(config, budget, lambda f, note: notes.append(note))
    assert config["calls"] == ["first", "second", "third"]  # nothing ran again
    assert again.results == run.results and again.seconds == run.seconds
    assert notes == ["first: done earlier", "second: done earlier", "third: done earlier", "done"]
    trace = (tmp_path / TRACE).read_text().splitlines()
    assert [line.split()[1:] for line in trace] == [[n, what] for n in THREE.names for what in ("start", "done")]


def test_a_stage_that_raises_records_nothing_and_runs_again(tmp_path):
    config = {"calls": [], "fail": "user"}
    with pytest.raises(StageError, match=r"stage second: the input is wrong \(finished stages are kept"):
        THREE.open(tmp_path).execute(config, Budget("b"))
    state = json.loads((tmp_path / "tiny.json").read_text())
    assert list(state["stages"]) == ["first"] and not state["finished"]

    config["fail"] = "bug"  # anything but a UserFixableError is a bug: it propagates as it is
    with pytest.raises(RuntimeError, match="a bug"):
        THREE.open(tmp_path).execute(config, Budget("b"))

    config["fail"] = None
    run = THREE.open(tmp_path).execute(config, Budget("b"))
    assert config["calls"] == ["first", "second", "second", "second", "third"] and run.finished


def test_until_and_resume_keys(tmp_path):
    keyed = Pipeline("tiny", THREE.stages, resume_keys=("robot",))
    config = {"calls": []}
    run = keyed.open(tmp_path, {"robot": "rover"}).execute(config, Budget("b"), until="second")
    assert run.finished and list(run.results) == ["first", "second"]
    with pytest.raises(UserError, match="unknown stage 'fourth'"):
        keyed.open(tmp_path, {"robot": "rover"}).execute(config, Budget("b"), until="fourth")
    with pytest.raises(UserError, match=r"holds a tiny run with robot='rover', not 'quadruped'"):
        keyed.open(tmp_path, {"robot": "quadruped"})
    assert keyed.open(tmp_path, {"robot": "rover"}).execute(config, Budget("b")).finished
    assert config["calls"] == ["first", "second", "third"]


def test_early_stop_is_asked_again_on_resume(tmp_path):
    def stop_unless_forced(ctx, result) -> bool:
        return not ctx.config["force"]

    pipeline = Pipeline(
        "stops",
        (Stage("first", first), Stage("second", second, stop=stop_unless_forced), Stage("third", third)),
    )
    config = {"calls": [], "force": False}
    run = pipeline.open(tmp_path).execute(config, Budget("b"))
    assert run.stopped == "second" and run.finished and run.passed == ["first", "second"]
    run = pipeline.open(tmp_path).execute(config, Budget("b"))  # the same run stops there again
    assert run.stopped == "second" and config["calls"] == ["first", "second"]
    config["force"] = True
    run = pipeline.open(tmp_path).execute(config, Budget("b"))
    assert run.stopped is None and run.passed == pipeline.names and config["calls"] == ["first", "second", "third"]


def test_after_runs_each_time_a_run_passes_the_stage(tmp_path):
    seen = []
    pipeline = Pipeline(
        "after", (Stage("first", first, after=lambda ctx, r: seen.append(r["n"])), Stage("third", third))
    )
    config = {"calls": []}
    pipeline.open(tmp_path).execute(config, Budget("b"))
    pipeline.open(tmp_path).execute(config, Budget("b"))
    assert seen == [1, 1] and config["calls"] == ["first", "third"]


def build(ctx):
    """A fresh-dir stage: writes its directory piece by piece, and fails halfway when told to."""
    assert ctx.work == ctx.out / "model.partial" and not any(ctx.work.iterdir())  # empty, whatever was left there
    _calls(ctx).append("build")
    (ctx.work / "weights.bin").write_bytes(b"\0" * 1000)
    assert not ctx.stage_dir("model").exists()  # not under the final name while it is being built
    if ctx.config.get("fail"):
        raise RuntimeError("killed halfway")
    (ctx.work / "config.json").write_text("{}")
    return {"files": 2}


def use(ctx):
    _calls(ctx).append("use")
    return sorted(p.name for p in ctx.stage_dir("model").iterdir())


FRESH = Pipeline("fresh", (Stage("model", build, fresh_dir=True), Stage("use", use)))


def test_fresh_dir_stage_never_leaves_a_half_directory_under_its_name(tmp_path):
    config = {"calls": [], "fail": True}
    with pytest.raises(RuntimeError, match="killed halfway"):
        FRESH.open(tmp_path).execute(config, Budget("b"))
    assert not (tmp_path / "model").exists() and (tmp_path / "model.partial" / "weights.bin").is_file()

    config["fail"] = False
    run = FRESH.open(tmp_path).execute(config, Budget("b"))
    assert not (tmp_path / "model.partial").exists()
    assert run.results["use"] == ["config.json", MARKER, "weights.bin"]
    marker = json.loads((tmp_path / "model" / MARKER).read_text())
    assert marker["stage"] == "model" and marker["result"] == {"files": 2} and marker["seconds"] >= 0

    # renamed into place, then a crash before the state file recorded it: the directory's record is adopted
    state = json.loads((tmp_path / "fresh.json").read_text())
    del state["stages"]["model"]
    (tmp_path / "fresh.json").write_text(json.dumps(state))
    assert FRESH.open(tmp_path).execute(config, Budget("b")).results["model"] == {"files": 2}
    assert config["calls"] == ["build", "build", "use"]

    # a directory deleted since is built again, and what depends on it is not rebuilt by the runner
    for p in (tmp_path / "model").iterdir():
        p.unlink()
    (tmp_path / "model").rmdir()
    FRESH.open(tmp_path).execute(config, Budget("b"))
    assert config["calls"] == ["build", "build", "use", "build"]


def test_a_foreign_directory_under_the_final_name_is_refused_and_kept(tmp_path):
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "mine.txt").write_text("keep")
    config = {"calls": []}
    with pytest.raises(UserError, match=f"holds no {MARKER}"):
        FRESH.open(tmp_path).execute(config, Budget("b"))
    assert config["calls"] == [] and (tmp_path / "model" / "mine.txt").read_text() == "keep"


def test_state_is_replaced_atomically_after_every_stage(tmp_path):
    state_file = tmp_path / "watched.json"
    seen = []

    def look(ctx):
        """What another process sees while this stage runs: a complete state file, a new one after each stage."""
        seen.append((state_file.stat().st_ino, list(json.loads(state_file.read_text())["stages"])))
        return {"big": "x" * 200_000}

    pipeline = Pipeline("watched", tuple(Stage(f"s{i}", look) for i in range(4)))
    pipeline.open(tmp_path).execute({}, Budget("b"))
    assert [stages for _, stages in seen] == [[], ["s0"], ["s0", "s1"], ["s0", "s1", "s2"]]
    # one write between two stages, and it made a new file and renamed it over the old one (still linked while the
    # new one was made, so its inode number cannot have been reused): never a file rewritten in place
    inodes = [ino for ino, _ in seen]
    assert all(a != b for a, b in zip(inodes, inodes[1:], strict=False))
    assert sorted(p.name for p in tmp_path.iterdir()) == [TRACE, "watched.json"]  # no temporary files left


def test_progress_is_the_whole_run_weighted_by_expected_seconds(tmp_path):
    def halfway(ctx):
        ctx.progress(0.5, "half")
        ctx.progress(2.0, "beyond")  # clamped to the stage's share
        return None

    pipeline = Pipeline("weighted", (Stage("a", halfway, "first stage"), Stage("b", halfway, "second stage")))
    budget = Budget("b", expected_s={"a": 10, "b": 30})
    reports, announced = [], []
    pipeline.open(tmp_path).execute(
        {},
        budget,
        lambda f, note: reports.append((round(f, 3), note)),
        announce=lambda i, name, description, eta: announced.append((i, name, description, eta)),
    )
    assert announced == [(0, "a", "first stage", 40), (1, "b", "second stage", 30)]
    assert [f for f, _ in reports] == [0.0, 0.125, 0.25, 0.25, 0.25, 0.625, 1.0, 1.0, 1.0]
    assert [n for _, n in reports][:3] == ["a: first stage", "a: half", "a: beyond"]
    assert reports[-1] == (1.0, "done") and reports[-2][1].startswith("b: done in ")


def swallow(ctx):
    """A library that catches KeyboardInterrupt and carries on."""
    try:
        os.kill(os.getpid(), ctx.config["signal"])
        time.sleep(10)  # the handler raises here at once
    except KeyboardInterrupt:
        pass
    return "carried on"


def test_ctrl_c_swallowed_inside_a_stage_stops_the_run_when_the_stage_ends(tmp_path):
    before = signal.getsignal(signal.SIGINT)
    config = {"calls": [], "signal": signal.SIGINT}
    pipeline = Pipeline("sigint", (Stage("first", first), Stage("swallow", swallow), Stage("third", third)))
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        pipeline.open(tmp_path).execute(config, Budget("b"))
    assert time.monotonic() - t0 < 5  # the sleep was interrupted, not waited out
    state = json.loads((tmp_path / "sigint.json").read_text())
    assert list(state["stages"]) == ["first", "swallow"] and not state["finished"]  # the stage finished: recorded
    assert config["calls"] == ["first"]  # third never started
    assert signal.getsignal(signal.SIGINT) is before  # the handlers are the caller's again
    assert pipeline.open(tmp_path).execute(config, Budget("b")).finished and config["calls"] == ["first", "third"]


def test_a_nested_pipeline_stops_the_outer_one_too(tmp_path):
    inner = Pipeline("inner", (Stage("swallow", swallow), Stage("third", third)))

    def outer_stage(ctx):
        try:  # even if the outer stage swallows the inner run's KeyboardInterrupt as well
            inner.open(ctx.out / "inner").execute(ctx.config, Budget("b"))
        except KeyboardInterrupt:
            pass
        return "outer carried on"

    outer = Pipeline("outer", (Stage("nested", outer_stage), Stage("after", third)))
    config = {"calls": [], "signal": signal.SIGINT}
    with pytest.raises(KeyboardInterrupt):
        outer.open(tmp_path).execute(config, Budget("b"))
    assert list(json.loads((tmp_path / "outer.json").read_text())["stages"]) == ["nested"]
    assert list(json.loads((tmp_path / "inner" / "inner.json").read_text())["stages"]) == ["swallow"]
    assert config["calls"] == []


def test_a_nested_pipelines_user_error_names_the_path_to_its_stage(tmp_path):
    inner = Pipeline("inner", (Stage("first", first), Stage("second", second)))
    outer = Pipeline(
        "outer", (Stage("nested", lambda ctx: inner.open(ctx.out / "in").execute(ctx.config, Budget("b"))),)
    )
    with pytest.raises(StageError) as e:
        outer.open(tmp_path).execute({"calls": [], "fail": "user"}, Budget("b"))
    assert str(e.value) == (
        "stage nested/second: the input is wrong (finished stages are kept; re-run the same command to retry)"
    )


def test_sigterm_swallowed_inside_a_stage_stops_the_run(tmp_path):
    script = textwrap.dedent(
        f"""
        import signal, sys
        from sim2real.pipeline import Budget, Pipeline, Stage
        from tests.test_pipeline import first, swallow, third
        pipeline = Pipeline("sigterm", (Stage("first", first), Stage("swallow", swallow), Stage("third", third)))
        try:
            pipeline.open({str(tmp_path)!r}).execute({{"calls": [], "signal": signal.SIGTERM}}, Budget("b"))
        except KeyboardInterrupt:
            sys.exit(130)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=60
    )
    assert done.returncode == 130
    assert list(json.loads((tmp_path / "sigterm.json").read_text())["stages"]) == ["first", "swallow"]


def test_an_older_state_file_is_refused_in_one_line(tmp_path):
    (tmp_path / "tiny.json").write_text(json.dumps({"config": {}, "stages": {"first": {"verdict": "pass"}}}))
    with pytest.raises(UserError, match="older version"):
        THREE.open(tmp_path)
