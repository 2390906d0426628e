"""The guard around the instruction model: what goes in is screened, what comes out is clamped.

Nothing here trusts the model. Input: control characters and markup are removed, numbers and units are put in
canonical form (numbers.py; the same cleaning the training data gets), length is capped, and an
explicit request beyond the robot's limits ("go 100 m/s") is flagged whatever the model then writes. Output:
velocities are clamped to the command limits (from the policy manifest or the robot YAML) and the total duration
is cut at `max_duration_s`; text that is not a plan becomes STOP (planner.InstructionPlanner). Every change is
reported as a warning string; no input raises.
"""

from __future__ import annotations

import html
import math
import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from edge.instruct.numbers import canonical_numbers
from edge.instruct.plan import MAX_SEGMENTS, STOP, Plan, Segment

MAX_INSTRUCTION_CHARS = 200
# A stop instruction is one made only of stop expressions and the words people put around them ("freeze right
# there", "ok, that's enough, stop", "whoa, hold it!"): it is handled without the model, so it cannot be delayed or
# misread. Any other word (a number, a direction, a motion verb: "stop after 2 m", "wait 2 s then turn") sends the
# instruction to the model, which learnt stop phrasings too. Expressions are word sequences; a trailing "*" marks a
# verb that may take one object from STOP_OBJECTS ("stop moving", "kill the motors").
STOP_EXPRESSIONS = (
    "stop*",
    "halt*",
    "freeze*",
    "abort*",
    "cancel*",
    "brake",
    "e-stop",
    "estop",
    "emergency stop",
    "whoa",
    "woah",
    "wait",
    "pause*",
    "hold it",
    "hold still",
    "hold on",
    "hold up",
    "hold position",
    "hold your position",
    "stand still",
    "keep still",
    "be still",
    "stay",
    "stay still",
    "stay put",
    "stay where you are",
    "don't move",
    "don't go anywhere",
    "quit*",
    "cease*",
    "kill*",
    "cut it out",
    "cut the motors",
    "come to a stop",
    "come to a halt",
    "that's enough",
    "that is enough",
    "enough",
    "not another step",
)
STOP_OBJECTS = (
    "it",
    "that",
    "this",
    "everything",
    "all",
    "now",
    "moving",
    "driving",
    "turning",
    "spinning",
    "rolling",
    "going",
    "motion",
    "all motion",
    "the robot",
    "the motors",
    "the motor",
    "the mission",
    "the plan",
)
# said around a stop, adding nothing to it; the polite ones too ("would you stop right there for me", "i want you to
# halt"): a motion word beside them still sends the instruction to the model
STOP_FILLERS = frozenset(
    "please robot hey ok okay now right there here immediately instantly at once away asap this instant in place "
    "just already i said oh no and would could can will you for me kindly thanks thank pls want need to".split()
)
_STOP_PHRASES = tuple(
    sorted(
        {
            tuple(f"{e[:-1]} {o}".split()) if e.endswith("*") else tuple(e.split())
            for e in STOP_EXPRESSIONS
            for o in (STOP_OBJECTS if e.endswith("*") else ("",))
        }
        | {tuple(e[:-1].split()) for e in STOP_EXPRESSIONS if e.endswith("*")},
        key=len,
        reverse=True,
    )
)
# one spelling of each turning direction, the corpus's: "counter-clockwise" splits into tokens that end in "clockwise"
_DIRECTIONS = (
    (re.compile(r"\b(?:counter|anti)[- ]?clock[- ]?wise\b|\bccw\b"), "counterclockwise"),
    (re.compile(r"\bclock-wise\b|\bcw\b"), "clockwise"),
)
_MARKUP = re.compile(r"<[^<>]{0,200}>|```|\[/?[a-z]+\]|\{\{|\}\}")
_SPEED = re.compile(
    r"(\d+(?:\.\d+)?)\s*(m/s|mps|meters? per second|metres? per second|km/h|kph|"
    r"rad/s|radians? per second|deg/s|degrees? per second)"
)


@dataclass(frozen=True)
class PlanLimits:
    """Command ranges (vx, vy m/s; wz rad/s, positive = left) and the longest plan the robot will execute."""

    vx: tuple[float, float] = (-1.0, 1.0)
    vy: tuple[float, float] = (0.0, 0.0)
    wz: tuple[float, float] = (-1.5, 1.5)
    max_duration_s: float = 30.0

    @classmethod
    def from_command_limits(cls, limits: Mapping | object, max_duration_s: float = 30.0) -> PlanLimits:
        """From a manifest's `command_limits` dict or a sim.robot.CommandLimits."""

        def get(k: str) -> Any:
            return limits.get(k) if isinstance(limits, Mapping) else getattr(limits, k)

        pairs = {k: (float(get(k)[0]), float(get(k)[1])) for k in ("vx", "vy", "wz")}
        return cls(**pairs, max_duration_s=float(max_duration_s))


def limits_from_manifest(artifact: str, max_duration_s: float = 30.0) -> PlanLimits:
    """The command limits of a policy artifact's manifest: what the robot's policy was trained and validated for."""
    from edge.manifest import load_manifest

    return PlanLimits.from_command_limits(load_manifest(artifact).command_limits, max_duration_s)


def screen_instruction(text: object, limits: PlanLimits) -> tuple[str, list[str]]:
    """The instruction as the model sees it (clean_instruction) and warnings, including any explicit request
    beyond `limits`."""
    clean, warnings = clean_instruction(text)
    return clean, warnings + _over_limit_requests(clean, limits)


def clean_instruction(text: object) -> tuple[str, list[str]]:
    """The instruction as the model reads it, in training and in use: lower case, plain text, numbers and units in
    canonical form (m, s, rad), one spelling of (counter)clockwise, at most MAX_INSTRUCTION_CHARS; and warnings for
    what was removed or cut."""
    warnings: list[str] = []
    if not isinstance(text, str):
        return "", [f"instruction is {type(text).__name__}, not text"]
    n = len(text)
    if n > 4 * MAX_INSTRUCTION_CHARS:  # bound the work below on a huge message
        text = text[: 4 * MAX_INSTRUCTION_CHARS]
    # a phone's typographic apostrophe ("that’s") is the plain one
    clean = html.unescape(unicodedata.normalize("NFKC", text)).replace("°", " degrees ").replace("\u2019", "'")
    stripped = _MARKUP.sub(" ", clean)
    if stripped != clean:
        warnings.append("markup removed from the instruction")
    printable = "".join(c if c.isprintable() and ord(c) < 0x2000 else " " for c in stripped)
    if printable != stripped:
        warnings.append("control or unusual characters removed from the instruction")
    clean = canonical_numbers(" ".join(printable.lower().split()))
    for pattern, direction in _DIRECTIONS:
        clean = pattern.sub(direction, clean)
    if len(clean) > MAX_INSTRUCTION_CHARS:
        clean = clean[:MAX_INSTRUCTION_CHARS].rsplit(" ", 1)[0]
    if n > MAX_INSTRUCTION_CHARS:
        warnings.append(f"instruction of {n} characters cut to {len(clean)}")
    if not clean:
        warnings.append("empty instruction: stopping")
    elif sum(c.isalpha() for c in clean) < 0.5 * len(clean.replace(" ", "")):
        warnings.append("instruction is mostly not words")
    return clean, warnings


def _over_limit_requests(text: str, limits: PlanLimits) -> list[str]:
    out = []
    for m in _SPEED.finditer(text):
        value, unit = float(m.group(1)), m.group(2)
        if unit in ("km/h", "kph"):
            value, unit = value / 3.6, "m/s"
        if unit.startswith("deg"):
            value, unit = math.radians(value), "rad/s"
        linear = "rad" not in unit
        top = max(abs(v) for v in (limits.vx + limits.vy if linear else limits.wz))
        if value > top + 1e-9:
            out.append(
                f"instruction asks for {m.group(0)}, above the limit {top:g} {'m/s' if linear else 'rad/s'}: "
                "the plan is clamped"
            )
    return out


def is_stop(text: str) -> bool:
    """A plain stop command (STOP_EXPRESSIONS, with fillers around them and nothing else), handled without the
    model so it cannot be delayed or misread."""
    words = re.sub(r"[^a-z'\- ]", " ", text.lower().replace("do not", "don't")).split()
    words = [w.strip("-'") for w in words if w.strip("-'")]
    found, i = False, 0
    while i < len(words):
        phrase = next((p for p in _STOP_PHRASES if tuple(words[i : i + len(p)]) == p), None)
        if phrase is not None:
            found, i = True, i + len(phrase)
        elif words[i] in STOP_FILLERS:
            i += 1
        else:
            return False
    return found


def clamp_plan(plan: Sequence[Segment], limits: PlanLimits) -> tuple[Plan, list[str]]:
    """Velocities into the limits, at most MAX_SEGMENTS segments, total duration at most max_duration_s."""
    warnings: list[str] = []
    out: list[Segment] = []
    if len(plan) > MAX_SEGMENTS:
        warnings.append(f"plan of {len(plan)} segments cut to {MAX_SEGMENTS}")
    remaining = limits.max_duration_s
    for i, seg in enumerate(plan[:MAX_SEGMENTS]):
        values = {}
        for key in ("vx", "vy", "wz"):
            lo, hi = getattr(limits, key)
            v = getattr(seg, key)
            values[key] = min(max(v, lo), hi)
            if values[key] != v:
                warnings.append(f"segment {i}: {key} {v:g} clamped to {values[key]:g}")
        duration = min(seg.duration_s, remaining)
        if duration < seg.duration_s:
            warnings.append(f"plan cut at the maximum duration {limits.max_duration_s:g} s")
        remaining -= duration
        out.append(replace(seg, **values, duration_s=duration))
        if remaining <= 0:
            break
    return tuple(out) or STOP, warnings
