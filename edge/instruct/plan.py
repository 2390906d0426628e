"""Command plans: the instruction model's output, a list of constant-velocity segments.

The strict grammar (what the model is trained to write and what constrained decoding enforces) is compact JSON in
one of two forms (PLAN_FORMATS), with numbers of at most three integer digits and two decimals, written short:
- `objects`: the keys in a fixed order, e.g.
  `[{"vx":0.5,"vy":0,"wz":0,"duration_s":2},{"vx":0,"vy":0,"wz":1,"duration_s":1.57}]`;
- `arrays`: each segment as [vx, vy, wz, duration_s], e.g. `[[0.5,0,0,2],[0,0,1,1.57]]`: the same plan in 21 SmolLM2
  tokens instead of 47 (the key names split into many tokens), so a pretrained base trains and plans twice as fast.
Short numbers let the model copy an instruction's number as it is written ("2.5 m" at 1 m/s is a duration of 2.5).
Durations are above zero. A model's config says which form it writes (`plan_format`; objects when absent).
`parse_plan` accepts either form of any JSON of that shape (spacing, key order, number format), so a plan written by
hand or by another model parses too. Velocities follow ROS REP 103: vx forward, vy left (m/s), wz counter-clockwise
= left (rad/s).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from edge.errors import EdgeError

FIELDS = ("vx", "vy", "wz", "duration_s")
METRICS = ("vx", "vy", "wz", "duration_s", "distance_m", "angle_rad")
MAX_SEGMENTS = 6  # longest plan the grammar allows; the corpus uses up to 6 (4 steps, a slow one in two halves)
_UNUM = r"(0|[1-9]\d{0,2})(\.\d{1,2})?"  # JSON: no leading zeros
# a duration: above zero, since a step of no duration is never what a person means ("FORWARD" planned as 0 s)
POSITIVE_NUMBER = r"([1-9]\d{0,2}(\.\d{1,2})?|0\.(0[1-9]|[1-9]\d?))"


PLAN_FORMATS = ("objects", "arrays")
# per form: the text before each of a segment's four values, and the text that closes the segment
SEGMENT_PIECES = {
    "objects": (('{"vx":', ',"vy":', ',"wz":', ',"duration_s":'), "}"),
    "arrays": (("[", ",", ",", ","), "]"),
}


def check_plan_format(form: str) -> str:
    if form not in PLAN_FORMATS:
        raise PlanError(f"plan format must be one of {', '.join(PLAN_FORMATS)}, got {form!r}")
    return form


def plan_format_of(config) -> str:
    """The form a model writes (its transformers config, config.json as a dict, or an exported manifest)."""
    value = config.get("plan_format") if isinstance(config, dict) else getattr(config, "plan_format", None)
    return check_plan_format(value or PLAN_FORMATS[0])


def plan_regex(slots: int = 0, form: str = "objects") -> str:
    """The grammar as a regular expression (vLLM's structured outputs take it as it is); with `slots` > 0 a value
    may also be a number slot #1..#slots (slots.py), a velocity also -#k. Durations are above zero."""
    slot = f"|#[1-{slots}]" if slots else ""
    num = f"-?({_UNUM}{slot})"
    duration = f"({POSITIVE_NUMBER}{slot})"
    before, close = SEGMENT_PIECES[check_plan_format(form)]
    values = (num, num, num, duration)
    segment = "".join(re.escape(b) + v for b, v in zip(before, values, strict=True)) + re.escape(close)
    return rf"\[{segment}(,{segment}){{0,{MAX_SEGMENTS - 1}}}\]"


PLAN_REGEX = plan_regex()


class PlanError(EdgeError, ValueError):
    """Model output that is not a plan; the message says what is wrong."""


@dataclass(frozen=True)
class Segment:
    vx: float = 0.0
    vy: float = 0.0
    wz: float = 0.0
    duration_s: float = 0.0


Plan = tuple[Segment, ...]
STOP: Plan = (Segment(),)


def _num(v: float) -> str:
    text = f"{v:.2f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def format_plan(plan: Sequence[Segment], form: str = "objects") -> str:
    """The plan in the strict grammar, in `form` (PLAN_FORMATS; values rounded to 0.01, trailing zeros dropped)."""
    before, close = SEGMENT_PIECES[check_plan_format(form)]
    return (
        "["
        + ",".join("".join(b + _num(getattr(s, f)) for b, f in zip(before, FIELDS, strict=True)) + close for s in plan)
        + "]"
    )


def parse_plan(text: str) -> Plan:
    """A JSON list of 1..MAX_SEGMENTS segments, each an object with exactly the keys vx, vy, wz, duration_s or a
    list of those four values in that order (finite numbers, duration >= 0). Raises PlanError otherwise."""
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, TypeError, RecursionError) as e:
        raise PlanError(f"not JSON: {e}") from None
    if not isinstance(data, list) or not 1 <= len(data) <= MAX_SEGMENTS:
        raise PlanError(f"a plan is a list of 1 to {MAX_SEGMENTS} segments")
    plan = []
    for i, seg in enumerate(data):
        if isinstance(seg, list) and len(seg) == len(FIELDS):
            values = seg
        elif isinstance(seg, dict) and set(seg) == set(FIELDS):
            values = [seg[k] for k in FIELDS]
        else:
            raise PlanError(f"segment {i} must have exactly the keys {', '.join(FIELDS)}, or be a list of their values")
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in values):
            raise PlanError(f"segment {i} holds a value that is not a finite number")
        if values[3] < 0:
            raise PlanError(f"segment {i} has a negative duration")
        plan.append(Segment(*(float(v) for v in values)))
    return tuple(plan)


def plan_metrics(plan: Sequence[Segment]) -> dict[str, float]:
    """What the eval set's `expect` ranges test: time-weighted mean velocities, total duration, distance (integral
    of vx) and turned angle (integral of wz). A plan of zero duration has zero means."""
    total = sum(s.duration_s for s in plan)
    distance = sum(s.vx * s.duration_s for s in plan)
    angle = sum(s.wz * s.duration_s for s in plan)
    lateral = sum(s.vy * s.duration_s for s in plan)
    mean = (lambda x: x / total) if total > 0 else (lambda x: 0.0)
    return {
        "vx": mean(distance),
        "vy": mean(lateral),
        "wz": mean(angle),
        "duration_s": total,
        "distance_m": distance,
        "angle_rad": angle,
    }


def plan_from_dicts(segments: Sequence[Mapping]) -> Plan:
    """A plan from a list of segment dicts (e.g. a JSONL field), validated like model output."""
    return parse_plan(json.dumps(list(segments)))


def plan_to_dicts(plan: Sequence[Segment]) -> list[dict[str, float]]:
    return [{k: getattr(s, k) for k in FIELDS} for s in plan]
