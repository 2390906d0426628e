"""Checkpoint files: written atomically (temp file, fsync, os.replace), read with `torch.load(weights_only=True)`.

A checkpoint holds only tensors, numbers, strings, lists and dicts (no pickled objects), so loading one cannot
run code. Layout: <run_dir>/checkpoints/model_<iteration>.pt.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import torch

from training.errors import CheckpointError

FORMAT_VERSION = 1
_NAME = re.compile(r"model_(\d+)\.pt$")


def checkpoint_path(run_dir: Path, iteration: int) -> Path:
    return Path(run_dir) / "checkpoints" / f"model_{iteration:06d}.pt"


def save_checkpoint(state: dict, path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "wb") as f:
        torch.save({"format": FORMAT_VERSION, **state}, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)  # readers see the old file or the new one, never half of one
    return path


def load_checkpoint(path: Path) -> dict:
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint {path} does not exist")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001 - any unpickling failure means the same thing to the user
        raise CheckpointError(f"{path}: not a readable checkpoint ({e.__class__.__name__})") from None
    if not isinstance(state, dict) or state.get("format") != FORMAT_VERSION:
        raise CheckpointError(f"{path}: not a checkpoint of format {FORMAT_VERSION}")
    return state


def checkpoints(run_dir: Path) -> list[tuple[int, Path]]:
    """The run's checkpoints as (iteration, path), oldest first."""
    paths = (Path(run_dir) / "checkpoints").glob("model_*.pt")
    return sorted((int(m.group(1)), p) for p in paths if (m := _NAME.search(p.name)))


def latest_checkpoint(run_dir: Path) -> Path | None:
    found = checkpoints(run_dir)
    return found[-1][1] if found else None


def checkpoint_in(path: Path) -> Path:
    """A checkpoint file as it is, or a run directory's latest checkpoint."""
    path = Path(path)
    if path.is_dir():
        found = latest_checkpoint(path)
        if found is None:
            raise CheckpointError(f"{path} holds no checkpoint (checkpoints/model_*.pt)")
        return found
    return path
