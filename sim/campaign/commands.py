"""Command sequences of a campaign: segments of absolute commands or scripted instructions, compiled to one
(vx, vy, wz) command per control step.

A segment is either `[seconds, vx, vy, wz]` or an instruction string: one or more motions joined by "and",
then an optional duration:

    MOTION [at SPEED | at PCT%] [and MOTION [at ...]]... [for SECONDS s]
    MOTION: forward | backward | left | right | turn left | turn right | stop

`left`/`right` strafe (vy); SPEED is m/s or rad/s, PCT% a share of the robot's command limit in that direction
(default 50%), e.g. "forward at 0.4 and turn left at 30% for 2 s". A segment without a duration lasts to the
end of the episode; the last command holds when the sequence is shorter than the episode. Scripted
instructions keep a campaign robot-agnostic (speeds relative to each robot's limits) and are the fixed
stand-in for what the instruction model emits.
"""

from __future__ import annotations

import re

import numpy as np

from sim.errors import CampaignError
from sim.robot import CommandLimits

# motion -> (command index, direction): the sign picks the limit (high for +1, low for -1)
MOTIONS = {
    "forward": (0, 1),
    "backward": (0, -1),
    "left": (1, 1),
    "right": (1, -1),
    "turn left": (2, 1),
    "turn right": (2, -1),
    "stop": (0, 0),
}
_MOTION = re.compile(
    r"^(?P<motion>turn left|turn right|forward|backward|left|right|stop)"
    r"(?:\s+at\s+(?P<speed>\d+(?:\.\d*)?)\s*(?P<pct>%)?)?$"
)
_DURATION = re.compile(r"^(?P<motions>.*?)(?:\s+for\s+(?P<seconds>\d+(?:\.\d*)?)\s*s)?$")
DEFAULT_SHARE = 0.5


def _parse(segment, src: str) -> tuple[float | None, list[re.Match[str]] | np.ndarray]:
    """(duration or None, list of motion matches or an absolute command); raises ValueError naming the segment."""
    if isinstance(segment, str):
        whole = _DURATION.match(" ".join(segment.lower().split()))
        assert whole is not None, "the pattern matches any one-line text"
        found = [_MOTION.match(m.strip()) for m in whole["motions"].split(" and ")]
        motions = [m for m in found if m is not None]
        if len(motions) != len(found):
            raise CampaignError(
                f"{src}: cannot read instruction {segment!r}; expected e.g. 'forward at 0.5 for 2 s', "
                f"'forward and turn left at 30% for 1 s', 'stop for 1 s' (motions: {', '.join(MOTIONS)})"
            )
        return (None if whole["seconds"] is None else float(whole["seconds"])), motions
    if isinstance(segment, (list, tuple)) and len(segment) == 4:
        try:
            values = [float(v) for v in segment]
        except (TypeError, ValueError):
            values = [np.nan]
        if np.all(np.isfinite(values)) and values[0] > 0:
            return values[0], np.asarray(values[1:])
    raise CampaignError(f"{src}: segment {segment!r} is neither an instruction nor [seconds > 0, vx, vy, wz]")


def check_sequence(segments, src: str) -> None:
    """Raise ValueError (naming `src`) unless `segments` is a non-empty list of valid segments."""
    if not isinstance(segments, list) or not segments:
        raise CampaignError(f"{src}: a command sequence must be a non-empty list of segments")
    for i, seg in enumerate(segments):
        duration, _ = _parse(seg, f"{src}[{i}]")
        if duration is None and i != len(segments) - 1:
            raise CampaignError(f"{src}[{i}]: only the last segment may omit 'for SECONDS s'")


def _command(motions: list[re.Match], limits: CommandLimits) -> np.ndarray:
    cmd = np.zeros(3)
    for match in motions:
        index, direction = MOTIONS[match["motion"]]
        if direction == 0:
            continue
        bound = (limits.high() if direction > 0 else limits.low())[index]
        if match["speed"] is None:
            cmd[index] = DEFAULT_SHARE * bound
        elif match["pct"]:
            cmd[index] = float(match["speed"]) / 100.0 * bound
        else:
            cmd[index] = direction * float(match["speed"])
    return cmd


def compile_sequence(segments: list, limits: CommandLimits, dt: float, steps: int) -> np.ndarray:
    """(steps, 3) commands, one per control step of period dt, clipped to the robot's command limits."""
    out = np.zeros((steps, 3))
    t = 0
    cmd = np.zeros(3)
    for seg in segments:
        duration, spec = _parse(seg, "command sequence")
        cmd = _command(spec, limits) if isinstance(spec, list) else spec
        n = steps - t if duration is None else int(round(duration / dt))
        out[t : t + n] = cmd
        t = min(t + n, steps)
    out[t:] = cmd
    return np.clip(out, limits.low(), limits.high())
