"""`run_loop(cfg)`: the loop's stages on the one Stage runner (sim2real.pipeline), with a report after every stage.

The run directory's loop.json records the config and each finished stage's result, rewritten atomically after
every stage, so an interrupted run (Ctrl-C, SIGTERM, a crash, a power cut) resumes after the last finished stage
when the same command runs again; resuming with another robot or budget is refused. A stage that fails stops the
loop (a later stage would need what it did not produce); the report says which and why. With cfg.ray_address the
budget's heavy stages run as Ray tasks on that cluster (sim2real.loop.cluster); the state file and the report stay
here.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from sim2real.loop.config import BUDGETS, LoopConfig
from sim2real.loop.stages import STAGES
from sim2real.pipeline import Announce, Finished, Pipeline, Progress, Run

PIPELINE = Pipeline("loop", STAGES, resume_keys=("robot", "budget"))
STATE_FILE = PIPELINE.state_file  # loop.json
REPORT_FILE = "report.html"


def latest_unfinished(root: Path, cfg: LoopConfig) -> Path | None:
    """The newest runs/loop-* run of this robot and budget that did not finish: what a bare re-run resumes."""
    for run in sorted(root.glob("loop-*"), reverse=True):
        state = run / STATE_FILE
        if not state.is_file():
            continue
        raw = json.loads(state.read_text())
        if not raw.get("finished") and raw["config"]["robot"] == cfg.robot and raw["config"]["budget"] == cfg.budget:
            return run
    return None


def run_loop(cfg: LoopConfig, announce: Announce, finished: Finished, progress: Progress) -> Run:
    """Run (or resume) the loop in cfg.out; returns the run (results, seconds, finished). KeyboardInterrupt
    (Ctrl-C or SIGTERM) leaves the finished stages recorded and propagates."""
    from sim2real.library_logs import LOG_FILE, library_logs
    from sim2real.loop.cluster import connected, on_cluster
    from sim2real.loop.report import write_report

    out = Path(cfg.out)
    budget = BUDGETS[cfg.budget]
    pipeline = PIPELINE
    if cfg.ray_address:
        pipeline = dataclasses.replace(PIPELINE, stages=on_cluster(STAGES, budget.resources, out / STATE_FILE))
    run = pipeline.open(out, cfg.to_dict())

    def stage_finished(name: str, result: dict, seconds: float) -> None:
        finished(name, result, seconds)
        write_report(out, run)

    with library_logs(out / LOG_FILE), connected(cfg.ray_address):  # the console keeps the loop's own lines
        run.execute(cfg, budget.budget(), progress, until=cfg.until, announce=announce, finished=stage_finished)
    write_report(out, run)
    return run
