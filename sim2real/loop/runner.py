"""`run_loop(cfg)`: the stages in order, resumable, with a report after every stage.

The run directory's loop.json records the config and each finished stage's result; it is rewritten atomically
after every stage, so an interrupted run (Ctrl-C, SIGTERM, a crash, a power cut) resumes after the last finished
stage when the same command runs again. A stage that fails stops the loop (a later stage would need what it
did not produce); the report says which and why.
"""

from __future__ import annotations

import dataclasses
import json
import signal
import time
from collections.abc import Callable
from pathlib import Path

from edge.fileio import atomic_write_bytes
from sim2real.errors import UserError
from sim2real.loop.config import LoopConfig
from sim2real.loop.stages import FAIL, STAGE_NAMES, STAGES, StageContext, StageResult

STATE_FILE = "loop.json"
REPORT_FILE = "report.html"
# seconds each stage takes on 2 cores, by budget: the ETA shown before a stage starts (then replaced by this
# run's own timings as they come in)
EXPECTED_S = {
    "minimal": {
        "train": 90,
        "export": 10,
        "validate": 40,
        "instruction": 90,
        "deploy": 60,
        "analyse": 5,
        "retrain": 90,
        "final": 60,
    },
    "quick": {
        "train": 150,
        "export": 10,
        "validate": 40,
        "instruction": 240,
        "deploy": 80,
        "analyse": 5,
        "retrain": 240,
        "final": 80,
    },
    "full": {
        "train": 900,
        "export": 10,
        "validate": 600,
        "instruction": 1800,
        "deploy": 150,
        "analyse": 10,
        "retrain": 1800,
        "final": 150,
    },
}

Announce = Callable[[int, str, str, float], None]  # (index, stage, description, ETA of the rest in s)
Finished = Callable[[str, StageResult, float], None]  # (stage, result, seconds)


class LoopState:
    """loop.json: the config the run started with and the result of each finished stage."""

    def __init__(self, out: Path, cfg: LoopConfig):
        self.path = out / STATE_FILE
        self.cfg = cfg
        self.stages: dict[str, dict] = {}
        self.finished = False
        if self.path.is_file():
            raw = json.loads(self.path.read_text())
            started = raw["config"]
            for key in ("robot", "budget"):
                if started[key] != getattr(cfg, key):
                    raise UserError(
                        f"{out} holds a loop run with {key}={started[key]!r}, not {getattr(cfg, key)!r};"
                        f" pass --{key} {started[key]} to resume it, or another --out"
                    )
            self.stages = raw["stages"]
            self.finished = raw.get("finished", False)

    def results(self) -> dict[str, StageResult]:
        return {name: StageResult(s["verdict"], s["figure"], s["data"]) for name, s in self.stages.items()}

    def record(self, name: str, result: StageResult, seconds: float) -> None:
        self.stages[name] = {**dataclasses.asdict(result), "seconds": round(seconds, 1)}
        self.save()

    def save(self) -> None:
        body = {"config": self.cfg.to_dict(), "stages": self.stages, "finished": self.finished}
        atomic_write_bytes(self.path, json.dumps(body, indent=1, default=str).encode())


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


def run_loop(
    cfg: LoopConfig, announce: Announce, finished: Finished, progress: Callable[[float, str], None]
) -> LoopState:
    """Run (or resume) the loop in cfg.out; returns the state. KeyboardInterrupt (Ctrl-C or SIGTERM) leaves the
    finished stages recorded and propagates."""
    from sim2real.loop.report import write_report

    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    state = LoopState(out, cfg)
    state.save()
    wanted = _wanted(cfg.until)
    interrupted = {"flag": False}

    def on_signal(signum, frame) -> None:
        interrupted["flag"] = True  # kept even if a library swallows the KeyboardInterrupt inside a stage
        raise KeyboardInterrupt

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        for index, (name, stage, description) in enumerate(STAGES):
            if name in state.stages or name not in wanted:
                continue
            eta = sum(EXPECTED_S[cfg.budget][n] for n in STAGE_NAMES[index:] if n not in state.stages and n in wanted)
            announce(index, name, description, eta)
            ctx = StageContext(cfg, out, state.results(), progress)
            t0 = time.monotonic()
            try:
                result = stage(ctx)
            except UserError as e:  # nothing recorded: the same command retries the stage
                raise UserError(
                    f"stage {name}: {e} (finished stages are kept; re-run the same command to retry)"
                ) from None
            state.record(name, result, time.monotonic() - t0)
            finished(name, result, time.monotonic() - t0)
            write_report(out, state)
            if interrupted["flag"]:
                raise KeyboardInterrupt
            if result.verdict == FAIL:
                break
        state.finished = all(n in state.stages for n in wanted) or any(
            s["verdict"] == FAIL for s in state.stages.values()
        )
        state.save()
        write_report(out, state)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return state


def _wanted(until: str) -> list[str]:
    """Every stage up to `until` ("" = all): a stage needs what the earlier ones produced."""
    if not until:
        return list(STAGE_NAMES)
    if until not in STAGE_NAMES:
        raise UserError(f"unknown stage {until!r}; stages: {', '.join(STAGE_NAMES)}")
    return STAGE_NAMES[: STAGE_NAMES.index(until) + 1]
