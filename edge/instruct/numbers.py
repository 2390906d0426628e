"""Numbers and units in canonical form before the model reads them (in training and in use), so the model copies
numbers instead of doing arithmetic: number words become digits ("ninety" -> "90", "twenty-five" -> "25"),
centimetres and millimetres become metres, milliseconds seconds, degrees radians ("90 degrees" -> "1.57 rad",
"30 deg/s" -> "0.52 rad/s"). Ordinals ("first", "second") and "a"/"half" are left alone: they are language.
"""

from __future__ import annotations

import math
import re

_UNITS = {
    w: i
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
        "seventeen eighteen nineteen".split()
    )
}
_TENS = {w: 10 * i for i, w in enumerate("twenty thirty forty fifty sixty seventy eighty ninety".split(), 2)}
_WORD = "|".join(sorted([*_UNITS, *_TENS], key=len, reverse=True))
# [units-or-tens [-| ]units] [hundred [[and] units-or-tens [-| ]units]], as whole words
_NUMBER = re.compile(rf"\b(?:({_WORD})(?:[- ]({_WORD}))?)(?: hundred(?:(?: and)? ({_WORD})(?:[- ]({_WORD}))?)?)?\b")
_VALUE = r"(\d+(?:\.\d+)?)\s*"
_CONVERSIONS = [  # (pattern after a number, factor, canonical unit)
    (r"(?:cm|centimet(?:er|re)s?)\b", 0.01, "m"),
    (r"(?:mm|millimet(?:er|re)s?)\b", 0.001, "m"),
    (r"(?:ms|milliseconds?)\b", 0.001, "s"),
    (r"(?:deg|degrees?)(?:/s\b|\s*per\s*second\b)", math.pi / 180, "rad/s"),
    (r"(?:deg|degrees?)\b", math.pi / 180, "rad"),
]
_UNIT_PATTERNS = [(re.compile(r"\b" + _VALUE + unit), factor, name) for unit, factor, name in _CONVERSIONS]


def _small(a: str | None, b: str | None) -> int | None:
    """Value of 'twenty five' / 'seven' / 'twenty'; None for pairs that are not one number ('five six')."""
    if a is None:
        return 0
    if b is None:
        return _UNITS.get(a, _TENS.get(a))
    if a in _TENS and b in _UNITS and 0 < _UNITS[b] < 10:
        return _TENS[a] + _UNITS[b]
    return None


def digits_for_number_words(text: str) -> str:
    def one(word: str) -> str:
        return str(_UNITS.get(word, _TENS.get(word)))

    def replace(m: re.Match) -> str:
        head = _small(m.group(1), m.group(2))
        if head is None:  # two separate numbers ('five six')
            return m.group(0).replace(m.group(1), one(m.group(1)), 1).replace(m.group(2), one(m.group(2)))
        if " hundred" in m.group(0):
            tail = _small(m.group(3), m.group(4))
            if tail is None or not 0 < head < 10:
                return m.group(0)
            return str(head * 100 + tail)
        return str(head)

    return _NUMBER.sub(replace, text)


def _short(value: float) -> str:
    return f"{round(value, 2):g}"


def canonical_units(text: str) -> str:
    for pattern, factor, name in _UNIT_PATTERNS:
        text = pattern.sub(lambda m, f=factor, n=name: f"{_short(float(m.group(1)) * f)} {n}", text)
    return text


def canonical_numbers(text: str) -> str:
    """Number words as digits, then lengths in m, times in s, angles in rad."""
    return canonical_units(digits_for_number_words(text))
