"""Fine-tuning: from the deployed artifact back to the run that trained it, and a new PPO run that starts from
that run's weights and normalisers with the domain randomisation centred on the identified parameters."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path

from edge.manifest import Manifest
from training.errors import TrainingError
from training.ppo.checkpoint import latest_checkpoint
from training.ppo.config import PPOConfig
from training.retrain.sysid import NOMINAL

DEFAULT_RUNS = Path("runs")


def training_run_dir(
    artifact_dir: Path, manifest: Manifest, registered: str | None = None, runs_root: Path = DEFAULT_RUNS
) -> Path:
    """The run directory that holds the deployed artifact's checkpoints: the one the lineage registry recorded,
    the artifact's own parent (an artifact exported into <run>/policy), or <runs_root>/<training_run_id>."""
    candidates = [Path(registered)] if registered else []
    candidates += [artifact_dir.resolve().parent, runs_root / manifest.training_run_id]
    for run in candidates:
        info = run / "run_info.json"
        if latest_checkpoint(run) is None:
            continue
        if info.is_file() and json.loads(info.read_text()).get("run_id") not in (None, manifest.training_run_id):
            continue  # checkpoints of another run
        return run
    raise TrainingError(
        f"cannot find the training run of {artifact_dir} (training_run_id "
        f"{manifest.training_run_id!r}): looked in {', '.join(str(c) for c in candidates)}; "
        "fine-tuning starts from its checkpoints"
    )


def finetune_config(
    run_dir: Path,
    ranges: dict[str, list[float]],
    out_root: Path,
    overrides: dict,
    seed: int = 0,
    duty: list[list[float]] | None = None,
) -> PPOConfig:
    """The deployed run's own config, starting from its latest checkpoint, randomisation centred on `ranges`; the
    envs that rehearse (`rehearsal_share` of the overrides) keep the run's own randomisation. A run trained on the
    nominal twin keeps everything else nominal (no pushes, no observation noise): the fine-tuning adapts it to what
    was identified, not to a harder task at the same time. `duty`: the logged commands (training.retrain.duty),
    which `duty_share` of the overrides' command draws take; without them every draw is the task's."""
    cfg = PPOConfig.from_yaml(run_dir / "config.yaml")
    own = cfg.randomization_ranges or {}
    if not cfg.randomization:
        own = {**{k: [v, v] for k, v in NOMINAL.items()}, "obs_noise": 0.0, "push_interval_s": 0.0}
        ranges = {**own, **ranges}
    if not duty:
        overrides = {**overrides, "duty_share": 0.0}
    return cfg.replace(
        **{
            "init_from": str(latest_checkpoint(run_dir)),
            "randomization": True,
            "randomization_ranges": ranges,
            "rehearsal_ranges": own,
            "duty": duty or None,
            "run_root": str(out_root),
            "seed": seed,
            "stop_at_threshold": False,
            "max_seconds": None,
            "export": False,  # the retraining exports the checkpoint it chooses (sim2real.retrain.pipeline)
            "num_workers": 1,
            "ray_address": None,
            **overrides,
        }
    )


def find_run(out_root: Path, robot: str) -> Path | None:
    """The fine-tuning run an interrupted retraining started (the newest under out_root/<robot>)."""
    runs = sorted(p for p in (out_root / robot).glob("*") if (p / "config.yaml").is_file())
    return runs[-1] if runs else None


class ProgressWatcher:
    """Reports (iterations done, total) from a run's progress.jsonl while training runs in this process."""

    def __init__(self, out_root: Path, robot: str, total: int, report: Callable[[int, int], None]):
        self.out_root, self.robot, self.total, self.report = out_root, robot, total, report
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> ProgressWatcher:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        offset, path = 0, None
        while not self._stop.wait(0.5):
            run = find_run(self.out_root, self.robot)
            if run is None:
                continue
            if path != run / "progress.jsonl":
                path, offset = run / "progress.jsonl", 0
            if not path.is_file():
                continue
            with open(path, "rb") as f:
                f.seek(offset)
                for line in f:
                    if not line.endswith(b"\n"):
                        break
                    offset += len(line)
                    record = json.loads(line)
                    if record.get("type") == "iteration":
                        self.report(int(record["iteration"]), self.total)
