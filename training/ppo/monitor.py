"""What a run shows while it runs: TensorBoard scalars, a progress bar, and progress.jsonl.

Only rank 0 writes. progress.jsonl holds one JSON object per iteration and per event (checkpoint, evaluation,
threshold, restore, stop); a Ray driver tails it to draw the same progress bar its workers cannot draw.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

PLAIN_LINE_EVERY_S = 10.0  # without a terminal (CI, pipes): one plain progress line this often


class ProgressBar:
    """Iterations done / total with ETA, mean episode return, env-steps/s and (on terrain) the mean curriculum
    level; events printed above the bar."""

    def __init__(self, total: int, start: int = 0, description: str = "train"):
        self.console = Console(stderr=True)
        self.live = self.console.is_terminal
        self.total, self.last_plain = total, 0.0
        self.reward, self.fps = math.nan, 0.0
        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            TextColumn("{task.fields[status]}"),
            console=self.console,
            disable=not self.live,
        )
        self.task = self.progress.add_task(description, total=total, completed=start, status="")
        self.progress.start()

    def update(self, record: dict) -> None:
        self.reward = record.get("Episode/return", self.reward)
        self.fps = record.get("Perf/env_steps_per_s", self.fps)
        reward = "-" if math.isnan(self.reward) else f"{self.reward:.3f}"
        status = f"mean return {reward:>7}  {self.fps:8,.0f} env-steps/s"
        if "Terrain/level" in record:
            status += f"  terrain level {record['Terrain/level']:.2f}"
        self.progress.update(self.task, completed=record["iteration"], status=status)
        now = time.monotonic()
        if not self.live and (now - self.last_plain >= PLAIN_LINE_EVERY_S or record["iteration"] >= self.total):
            self.last_plain = now
            self.message(f"iteration {record['iteration']}/{self.total}  {status}")

    def message(self, text: str) -> None:
        self.console.print(text, highlight=False, markup=False, soft_wrap=True)

    def close(self) -> None:
        self.progress.stop()


def describe_event(record: dict) -> str:
    """One human line for a progress.jsonl event."""
    fields = ", ".join(f"{k}={_short(v)}" for k, v in record.items() if k not in ("type", "event", "iteration"))
    return f"[{record['event']}] iteration {record['iteration']}" + (f": {fields}" if fields else "")


def _short(value) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


class Monitor:
    """Rank 0's sink for per-iteration scalars and events."""

    def __init__(self, run_dir: Path, total: int, start: int, show_progress: bool):
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(log_dir=str(run_dir), flush_secs=10)
        self.file = open(Path(run_dir) / "progress.jsonl", "a")  # noqa: SIM115 - open for the run's lifetime
        self.bar = ProgressBar(total, start) if show_progress else None

    def iteration(self, it: int, scalars: dict[str, float]) -> None:
        for key, value in scalars.items():
            self.writer.add_scalar(key, value, it)
        self._write({"type": "iteration", "iteration": it, **scalars})
        if self.bar:
            self.bar.update({"iteration": it, **scalars})

    def event(self, name: str, it: int, **fields) -> None:
        record = {"type": "event", "event": name, "iteration": it, **fields}
        self._write(record)
        if self.bar:
            self.bar.message(describe_event(record))

    def _write(self, record: dict) -> None:
        self.file.write(json.dumps(record) + "\n")
        self.file.flush()

    def close(self) -> None:
        self.writer.close()
        self.file.close()
        if self.bar:
            self.bar.close()


class ProgressTail:
    """Feed a ProgressBar from a progress.jsonl another process writes (the Ray driver's view of rank 0)."""

    def __init__(self, path: Path, bar: ProgressBar):
        self.path, self.bar, self.offset = Path(path), bar, 0

    def poll(self) -> None:
        if not self.path.is_file():
            return
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            for line in f:
                if not line.endswith(b"\n"):
                    break  # a line being written; read it next time
                self.offset += len(line)
                record = json.loads(line)
                if record["type"] == "iteration":
                    self.bar.update(record)
                else:
                    self.bar.message(describe_event(record))
