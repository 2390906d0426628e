"""The one Stage runner: `sim2real loop`, the RLHF pipeline and the retraining pipeline are each a list of stages.

    PIPELINE = Pipeline("rlhf", (Stage("sft", sft, "supervised fine-tuning", fresh_dir=True), ...))
    run = PIPELINE.open(out, {"robot": "rover"}).execute(config, BUDGETS["quick"], progress)
    run.results["sft"], run.seconds["sft"]

A stage function gets a StageContext (the run's config, the output directory, the results of the stages before
it, its budget settings, a Progress for its own share of the run) and returns a JSON-able result (dicts, lists,
dataclasses of them, objects with a to_json()). The runner:
- records each finished stage's result and seconds in `<out>/<pipeline name>.json`, rewritten atomically after
  every stage, and appends the stage's start and end to `<out>/stages.log`. A re-run skips every recorded stage
  and resumes after the last one; a stage that raises records nothing and runs again on the next call. Results
  reach later stages as they read back from JSON, so a resumed run sees exactly what an uninterrupted one does.
- builds a `fresh_dir` stage in an empty `<out>/<name>.partial/`, writes the stage's record there as
  `stage.json`, then renames the directory to `<out>/<name>/`: the directory appears under its final name only
  when complete (later stages and other processes read it), and the stage counts as finished exactly when that
  directory holds stage.json. A directory under the final name without one is someone else's: never touched.
- ends the run after a stage whose `stop(ctx, result)` is true (asked again on resume, so the run stops there
  again), or after the stage named by `until`.
- turns Ctrl-C and SIGTERM into KeyboardInterrupt and remembers them, so a library that swallows the
  KeyboardInterrupt inside a stage cannot keep the run going past that stage's end.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edge.errors import UserFixableError
from edge.fileio import atomic_write_bytes
from sim2real.errors import UserError

Progress = Callable[[float, str], None]  # (fraction done in [0, 1], what is happening)
Announce = Callable[[int, str, str, float], None]  # (stage index, name, description, ETA of the stages left in s)
Finished = Callable[[str, Any, float], None]  # (stage, result, seconds) of a stage that ran in this call

MARKER = "stage.json"  # a fresh-dir stage's record, inside its directory
TRACE = "stages.log"  # append-only: a line per stage start and end (people read it after a crash)
_MOVE_AWAY = "move it away or choose another output directory"


def no_progress(fraction: float, note: str) -> None:
    """A Progress that shows nothing."""


@dataclass(frozen=True)
class Budget:
    """A named budget: the settings of each stage (by stage name; a stage reads its own as ctx.settings) and the
    seconds each stage is expected to take (the ETAs, and the weights that make stage fractions one fraction)."""

    name: str
    settings: Mapping[str, Any] = field(default_factory=dict)
    expected_s: Mapping[str, float] = field(default_factory=dict)


@dataclass
class StageContext:
    config: Any  # the run's configuration, as the pipeline's caller built it
    out: Path  # the pipeline's output directory
    results: dict[str, Any]  # the results of the stages before this one, by name
    progress: Progress  # this stage's own fraction done and a note
    settings: Any = None  # the budget's settings for this stage (None: it has none)
    work: Path | None = None  # a fresh-dir stage's empty directory to build in (None for other stages)

    def stage_dir(self, name: str) -> Path:
        """The directory of the fresh-dir stage `name` (complete once that stage has finished)."""
        return self.out / name


@dataclass(frozen=True)
class Stage:
    name: str
    run: Callable[[StageContext], Any]
    description: str = ""
    fresh_dir: bool = False  # builds <out>/<name>/ from nothing; it appears under that name only when complete
    stop: Callable[[StageContext, Any], bool] | None = None  # (ctx, result) -> True: the run ends after this stage
    # (ctx, result), each time a run passes the stage, whether it ran now or was recorded earlier: the side effects
    # a later process must see again (registry rows, log lines)
    after: Callable[[StageContext, Any], None] | None = None


class StageError(UserError):
    """A stage stopped on an error a person can fix; the finished stages are kept for the re-run."""

    def __init__(self, stage: str, message: str):
        super().__init__(f"stage {stage}: {message} (finished stages are kept; re-run the same command to retry)")
        self.stage, self.message = stage, message


@dataclass(frozen=True)
class Pipeline:
    name: str  # also names the state file, <out>/<name>.json
    stages: tuple[Stage, ...]
    resume_keys: tuple[str, ...] = ()  # config record keys a resuming call must share with the run it resumes

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.stages]

    @property
    def state_file(self) -> str:
        return f"{self.name}.json"

    def open(self, out: str | Path, record: Mapping[str, Any] | None = None) -> Run:
        """The run in `out`: resumed from its state file, or started (the state file is written at once).
        `record` is the JSON-able configuration kept in the state file; a state file whose `resume_keys` differ
        from it is refused."""
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        run = Run(self, out, dict(record or {}))
        if run.path.is_file():
            run.load()
        run.adopt_fresh_dirs()
        run.save()
        return run


@dataclass
class Run:
    """One pipeline's run in its output directory: the state file's content and the execution of the stages."""

    pipeline: Pipeline
    out: Path
    config: dict  # the configuration record
    records: dict[str, dict] = field(default_factory=dict)  # stage -> {"seconds", "result"}
    finished: bool = False  # nothing left to do: every wanted stage recorded, or a stage stopped the run
    passed: list[str] = field(default_factory=list)  # the stages the last execute() went through, in order
    stopped: str | None = None  # the stage that ended the last execute() early

    @property
    def path(self) -> Path:
        return self.out / self.pipeline.state_file

    @property
    def results(self) -> dict[str, Any]:
        """Every recorded stage's result, in stage order."""
        return {n: self.records[n]["result"] for n in self.pipeline.names if n in self.records}

    @property
    def seconds(self) -> dict[str, float]:
        """Every recorded stage's wall time when it ran, in stage order."""
        return {n: self.records[n]["seconds"] for n in self.pipeline.names if n in self.records}

    def body(self) -> dict:
        """The state file's content."""
        stages = {n: self.records[n] for n in self.pipeline.names if n in self.records}
        return {"pipeline": self.pipeline.name, "config": self.config, "stages": stages, "finished": self.finished}

    def save(self) -> None:
        atomic_write_bytes(self.path, json.dumps(self.body(), indent=1, default=str).encode())

    def load(self) -> None:
        try:
            raw = json.loads(self.path.read_text())
        except json.JSONDecodeError:
            raise UserError(f"{self.path} is not a state file: {_MOVE_AWAY}") from None
        started = raw.get("config") or {}
        for key in self.pipeline.resume_keys:
            if key in started and started[key] != self.config.get(key):
                raise UserError(
                    f"{self.out} holds a {self.pipeline.name} run with {key}={started[key]!r}, not "
                    f"{self.config.get(key)!r}; resume it with {key} {started[key]}, or choose another output directory"
                )
        self.records = {name: _record(r, self.path) for name, r in (raw.get("stages") or {}).items()}
        self.finished = bool(raw.get("finished", False))

    def execute(
        self,
        config: Any,
        budget: Budget,
        progress: Progress | None = None,
        *,
        until: str = "",
        announce: Announce | None = None,
        finished: Finished | None = None,
    ) -> Run:
        """Run every stage not recorded yet, in order, up to `until` ("" = all); returns self. `progress` gets the
        fraction of the whole run; `announce` is called before a stage runs, `finished` after it ran.
        KeyboardInterrupt (Ctrl-C, SIGTERM) leaves the finished stages recorded and propagates."""
        wanted = self._wanted(until)
        progress = progress or no_progress
        weights = {n: float(budget.expected_s.get(n, 0.0)) for n in wanted}
        if not any(weights.values()):
            weights = dict.fromkeys(wanted, 1.0)
        total = sum(weights.values())
        self.passed, self.stopped = [], None
        done = 0.0
        with _interruptible():
            for index, stage in enumerate(s for s in self.pipeline.stages if s.name in wanted):
                ctx = StageContext(
                    config,
                    self.out,
                    {n: self.records[n]["result"] for n in self.passed},
                    _share(progress, stage.name, done / total, weights[stage.name] / total),
                    budget.settings.get(stage.name),
                    self.out / f"{stage.name}.partial" if stage.fresh_dir else None,
                )
                if stage.name in self.records:
                    ctx.progress(1.0, "done earlier")
                else:
                    if announce:
                        left = [n for n in wanted[index:] if n not in self.records]
                        announce(index, stage.name, stage.description, sum(budget.expected_s.get(n, 0.0) for n in left))
                    self._run(stage, ctx)
                    if finished:
                        finished(stage.name, self.records[stage.name]["result"], self.records[stage.name]["seconds"])
                done += weights[stage.name]
                self.passed.append(stage.name)
                result = self.records[stage.name]["result"]
                if stage.after:
                    stage.after(ctx, result)
                if _interrupted.is_set():  # a library swallowed the KeyboardInterrupt: stop now the stage is over
                    raise KeyboardInterrupt
                if stage.stop and stage.stop(ctx, result):
                    self.stopped = stage.name
                    break
        self.finished = self.stopped is not None or all(n in self.records for n in wanted)
        self.save()
        progress(1.0, "done")
        return self

    def _wanted(self, until: str) -> list[str]:
        """Every stage up to `until` ("" = all): a stage needs what the earlier ones produced."""
        names = self.pipeline.names
        if not until:
            return names
        if until not in names:
            raise UserError(f"unknown stage {until!r}; stages: {', '.join(names)}")
        return names[: names.index(until) + 1]

    def adopt_fresh_dirs(self) -> None:
        """A fresh-dir stage is finished exactly when its directory holds its record: one renamed into place just
        before a crash is adopted, one deleted since is run again."""
        for stage in self.pipeline.stages:
            if stage.fresh_dir:
                marker = self.out / stage.name / MARKER
                if marker.is_file():
                    self.records[stage.name] = _record(json.loads(marker.read_text()), marker)
                else:
                    self.records.pop(stage.name, None)

    def _run(self, stage: Stage, ctx: StageContext) -> None:
        final = self.out / stage.name
        if stage.fresh_dir:
            if final.exists():
                raise UserError(f"{final} exists but holds no {MARKER}: {_MOVE_AWAY}")
            shutil.rmtree(ctx.work, ignore_errors=True)  # what an interrupted attempt left
            ctx.work.mkdir(parents=True)
        self._trace(stage.name, "start")
        ctx.progress(0.0, stage.description or "started")
        t0 = time.perf_counter()
        try:
            result = stage.run(ctx)
        except StageError as e:  # a nested pipeline's stage: name the path to it once
            raise StageError(f"{stage.name}/{e.stage}", e.message) from None
        except UserFixableError as e:
            raise StageError(stage.name, str(e)) from None
        record = {"seconds": round(time.perf_counter() - t0, 1), "result": _plain(result)}
        if stage.fresh_dir:
            atomic_write_bytes(ctx.work / MARKER, json.dumps({"stage": stage.name, **record}, indent=1).encode())
            ctx.work.rename(final)
        self.records[stage.name] = record
        self.finished = False
        self.save()
        self._trace(stage.name, "done")
        ctx.progress(1.0, f"done in {record['seconds']:.0f} s")

    def _trace(self, stage: str, what: str) -> None:
        with open(self.out / TRACE, "a") as f:
            f.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {stage} {what}\n")


def _share(progress: Progress, stage: str, start: float, share: float) -> Progress:
    """A stage's Progress: its fraction becomes the run's, its note is prefixed with its name."""

    def report(fraction: float, note: str) -> None:
        # rounded: a stage's end and the next one's start are sums of the same weights in another order
        progress(round(start + share * min(max(fraction, 0.0), 1.0), 9), f"{stage}: {note}")

    return report


def _plain(result: Any) -> Any:
    """The result as it reads back from the state file: what an object's to_json() returns, dataclasses as dicts,
    paths and other objects as str."""

    def encode(o: Any) -> Any:
        if callable(getattr(o, "to_json", None)):
            return o.to_json()
        return dataclasses.asdict(o) if dataclasses.is_dataclass(o) and not isinstance(o, type) else str(o)

    return json.loads(json.dumps(result, default=encode))


def _record(raw: Any, where: Path) -> dict:
    if not (isinstance(raw, dict) and {"seconds", "result"} <= set(raw)):
        raise UserError(f"{where} was written by an older version of sim2real: {_MOVE_AWAY}")
    return {"seconds": raw["seconds"], "result": raw["result"]}


# Ctrl-C and SIGTERM: a flag that outlives a KeyboardInterrupt a library swallows, checked after every stage
_interrupted = threading.Event()


def _on_signal(signum: int, frame: Any) -> None:
    _interrupted.set()
    raise KeyboardInterrupt


@contextmanager
def _interruptible() -> Iterator[None]:
    """The signal handlers for one run. A nested run (a stage that runs a pipeline) keeps the outer run's, so the
    flag reaches both; off the main thread Python allows no handlers, and KeyboardInterrupt behaves as usual."""
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGINT) is _on_signal:
        yield
        return
    _interrupted.clear()
    previous = {sig: signal.signal(sig, _on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
