"""The operator's scripts: a /cmd_vel script (segments of constant command or linear chirps, repeated) or an
/instruction script (texts at simulated times)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

from edge.resources import config_path
from sim2real.errors import UserError

DEFAULT_COMMANDS = config_path("sil") / "default_commands.yaml"


AXES = ("vx", "vy", "wz")


@dataclass(frozen=True)
class Chirp:
    """A sine on one command axis whose frequency sweeps linearly over the segment: it excites the robot's response
    over a band of frequencies (system identification's chirp), on top of the segment's constant command."""

    axis: str
    amplitude: float
    from_hz: float
    to_hz: float

    def at(self, t: float, duration_s: float) -> float:
        rate = (self.to_hz - self.from_hz) / duration_s
        return self.amplitude * math.sin(2 * math.pi * (self.from_hz * t + 0.5 * rate * t * t))


@dataclass
class Segment:
    vx: float
    vy: float
    wz: float
    duration_s: float
    chirp: Chirp | None = None

    def command(self, t: float) -> np.ndarray:
        """The command `t` seconds into the segment."""
        cmd = np.array([self.vx, self.vy, self.wz])
        if self.chirp is not None:
            cmd[AXES.index(self.chirp.axis)] += self.chirp.at(t, self.duration_s)
        return cmd


@dataclass
class Instruction:
    t_s: float
    text: str


def load_commands(path: str | Path) -> list[Segment]:
    """A /cmd_vel script: {vx, vy, wz, duration_s} segments, played in order; a segment with `chirp: AXIS` adds a
    linear chirp on that axis ({amplitude, from_hz, to_hz})."""
    raw = yaml.safe_load(Path(path).read_text())
    if not isinstance(raw, list) or not raw:
        raise UserError(f"{path}: expected a non-empty list of {{vx, vy, wz, duration_s}}")
    try:
        segments = [_segment(s) for s in raw]
    except (KeyError, TypeError, AttributeError, ValueError):
        raise UserError(
            f"{path}: each segment needs numeric vx, vy, wz and duration_s; a chirp, an axis of "
            f"{', '.join(AXES)} and numeric amplitude, from_hz and to_hz"
        ) from None
    if any(s.duration_s <= 0 for s in segments):
        raise UserError(f"{path}: segment durations must be positive")
    if any(c.amplitude <= 0 or not 0 < c.from_hz <= c.to_hz for c in (s.chirp for s in segments) if c):
        raise UserError(f"{path}: a chirp needs amplitude > 0 and 0 < from_hz <= to_hz")
    return segments


def _segment(s: dict) -> Segment:
    chirp = None
    if "chirp" in s:
        if s["chirp"] not in AXES:
            raise ValueError(s["chirp"])
        chirp = Chirp(s["chirp"], float(s["amplitude"]), float(s["from_hz"]), float(s["to_hz"]))
    return Segment(float(s.get("vx", 0)), float(s.get("vy", 0)), float(s.get("wz", 0)), float(s["duration_s"]), chirp)


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
            return s.command(t)
        t -= s.duration_s
    return segments[-1].command(segments[-1].duration_s)
