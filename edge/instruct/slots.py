"""Number slots: the project's model reads an instruction's numbers as #1, #2, ... and writes #k where a plan value
is the k-th number, so a number is copied as one token, exactly, whatever its digits (delexicalisation, as
semantic parsers built on small models do). The planner puts the numbers back before the plan is parsed.

    split_numbers("go forward 1.5 m then rotate at -0.5 rad/s for 2 s")
    -> ("go forward #1 m then rotate at -#2 rad/s for #3 s", [1.5, 0.5, 2.0], ["span", "rate", "span"])

Which plan value becomes which slot is decided by what each number measures, read off its unit: a distance,
angle or time ("m", "rad", "s") can only be a segment's duration (plans run at fixed speeds, so 1.5 m is 1.5 s);
a speed or rate ("m/s", "rad/s", or no unit, as in "linear.x 0.4") only a velocity. A value equal to a number of
the right kind, or to its negative ("clockwise", "-#2"), is written as that number's slot, preferring
one not used yet; other values stay literal (the default speeds, 1.57 for "turn left"). The model sees the units,
so the rule is one it can learn; it never sees the magnitudes, which it does not need: clamping to the robot's
limits happens after the plan is filled in (safety.clamp_plan).

A model uses slots when its config says `number_slots: true` (the project's own model does; any other Hugging
Face model reads and writes plain numbers).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from edge.instruct.plan import FIELDS, PlanError

MAX_SLOTS = 9  # slots #1..#9 are single tokens; numbers beyond the ninth stay as digits
SLOT_TOKENS = tuple(f"#{k}" for k in range(1, MAX_SLOTS + 1))
_NUMBER = re.compile(r"(?<![\w.#])\d+(?:\.\d+)?(?![\d.]*\d)")  # unsigned: a minus stays in the text
_RATE_UNIT = re.compile(r"\s*(m/s|mps|rad/s|(meters?|metres?|radians?) per second)")
_SPAN_UNIT = re.compile(r"\s*(m|meters?|metres?|rad|radians?|s|sec|secs|seconds?)\b")
_PLAN_VALUE = re.compile(r'"(' + "|".join(FIELDS) + r')":(-?#\d|-?\d+(?:\.\d+)?)')
_SLOT = re.compile(r"(-?)#(\d)")


def split_numbers(text: str) -> tuple[str, list[float], list[str]]:
    """`text` with its first MAX_SLOTS numbers replaced by #1, #2, ...; the numbers; and what each measures:
    "rate" (a velocity) or "span" (a distance, angle or time)."""
    numbers: list[float] = []
    kinds: list[str] = []

    def slot(m: re.Match) -> str:
        if len(numbers) == MAX_SLOTS:
            return m.group(0)
        after = text[m.end() :]
        numbers.append(float(m.group(0)))
        kinds.append("span" if _SPAN_UNIT.match(after) and not _RATE_UNIT.match(after) else "rate")
        return f"#{len(numbers)}"

    return _NUMBER.sub(slot, text), numbers, kinds


def to_slots(plan_text: str, numbers: Sequence[float], kinds: Sequence[str]) -> str:
    """A plan written with numbers, rewritten with slots by the rule above (text that is not a plan's fields is
    left as it is). A rate is one command: its slot is used once, and a zero only where it was asked for (vx,
    wz), not for every segment's idle axes. A span may repeat (a slow move is two halves of the same length)."""
    used: list[int] = []

    def value(m: re.Match) -> str:
        field, raw = m.group(1), m.group(2)
        if "#" in raw or (field == "vy" and float(raw) == 0):
            return m.group(0)
        v = round(float(raw), 2)
        want = "span" if field == "duration_s" else "rate"
        matches = [
            (k, sign)
            for k, (n, kind) in enumerate(zip(numbers, kinds, strict=True))
            if kind == want
            for sign in ("", "-")
            if round(n if sign == "" else -n, 2) == v and (v != 0 or sign == "")
        ]
        fresh = [(k, s) for k, s in matches if k not in used]
        again = [(k, s) for k, s in matches if k in used] if want == "span" else []
        if not (fresh or again):
            return m.group(0)
        k, sign = fresh[0] if fresh else max(again, key=lambda ks: used.index(ks[0]))
        if k not in used:
            used.append(k)
        return f'"{field}":{sign}#{k + 1}'

    return _PLAN_VALUE.sub(value, plan_text)


def slot_spans(text: str, numbers: Sequence[float], kinds: Sequence[str]) -> str:
    """Free text (the reward model's totals line) with each number equal to a span number written as that
    number's slot (a minus stays in front)."""

    def number(m: re.Match) -> str:
        v = round(float(m.group(0)), 2)
        for k, (n, kind) in enumerate(zip(numbers, kinds, strict=True)):
            if kind == "span" and v != 0 and v == round(n, 2):
                return f"#{k + 1}"
        return m.group(0)

    return _NUMBER.sub(number, text)


def fill_slots(text: str, numbers: Sequence[float]) -> str:
    """The model's text with each slot replaced by its number; PlanError for a slot the instruction lacks."""

    def number(m: re.Match) -> str:
        k = int(m.group(2))
        if not 1 <= k <= len(numbers):
            raise PlanError(f"slot #{k}, but the instruction has {len(numbers)} number(s)")
        v = -numbers[k - 1] if m.group(1) else numbers[k - 1]
        return f"{v:.6g}"

    return _SLOT.sub(number, text)


def slot_count(prompt: str) -> int:
    """The highest slot in a prompt: how many slots a plan for it may use."""
    return max((int(k) for k in re.findall(r"#(\d)", prompt)), default=0)


def uses_number_slots(config) -> bool:
    """Whether a model (its transformers config, or config.json as a dict) reads and writes number slots."""
    return bool(config.get("number_slots") if isinstance(config, dict) else getattr(config, "number_slots", False))
