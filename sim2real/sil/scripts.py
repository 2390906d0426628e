"""The operator's scripts: a /cmd_vel script (segments of constant command, repeated) or an /instruction script
(texts at simulated times)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

from edge.resources import config_path
from sim2real.errors import UserError

DEFAULT_COMMANDS = config_path("sil") / "default_commands.yaml"


@dataclass
class Segment:
    vx: float
    vy: float
    wz: float
    duration_s: float


@dataclass
class Instruction:
    t_s: float
    text: str


def load_commands(path: str | Path) -> list[Segment]:
    """A /cmd_vel script: {vx, vy, wz, duration_s} segments, played in order."""
    raw = yaml.safe_load(Path(path).read_text())
    if not isinstance(raw, list) or not raw:
        raise UserError(f"{path}: expected a non-empty list of {{vx, vy, wz, duration_s}}")
    try:
        segments = [
            Segment(float(s.get("vx", 0)), float(s.get("vy", 0)), float(s.get("wz", 0)), float(s["duration_s"]))
            for s in raw
        ]
    except (KeyError, TypeError, AttributeError, ValueError):
        raise UserError(f"{path}: each segment needs numeric vx, vy, wz and duration_s") from None
    if any(s.duration_s <= 0 for s in segments):
        raise UserError(f"{path}: segment durations must be positive")
    return segments


def load_instructions(path: str | Path) -> list[Instruction]:
    """An instruction script: {t_s, text} entries, sent in time order."""
    if not Path(path).is_file():
        raise UserError(f"instruction script {path} does not exist")
    raw = yaml.safe_load(Path(path).read_text())
    if not isinstance(raw, list) or not raw:
        raise UserError(f"{path}: expected a non-empty list of {{t_s, text}}")
    try:
        script = [Instruction(float(e["t_s"]), str(e["text"])) for e in raw]
    except (KeyError, TypeError, ValueError):
        raise UserError(f"{path}: each entry needs a numeric t_s and a text") from None
    if any(not math.isfinite(i.t_s) or i.t_s < 0 for i in script):
        raise UserError(f"{path}: t_s must be finite and >= 0")
    return sorted(script, key=lambda i: i.t_s)


def command_at(segments: list[Segment], t: float) -> np.ndarray:
    """The command at time t (the script repeats)."""
    t = t % sum(s.duration_s for s in segments)
    for s in segments:
        if t < s.duration_s:
            return np.array([s.vx, s.vy, s.wz])
        t -= s.duration_s
    return np.array([segments[-1].vx, segments[-1].vy, segments[-1].wz])
