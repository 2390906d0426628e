"""The instruction corpus the project generates: instructions, their target plans and their intents.

Coverage (the issue's list): paraphrases, units (m, cm, mm, s, ms, degrees, radians, number words), multi-step
plans, repeats ("... two times"), negations ("don't turn, just ..."), filler and stop words, ROS conventions
(positive wz = left = counter-clockwise, linear.x / angular.z), made-up verbs and fillers. Target plans use the
default speeds (1 m/s, 1 rad/s, so a plan's duration reads off the instruction's numbers); an explicit velocity is
written as asked, even above the robot's limits (the guard clamps it), and the intent is what the clamped plan
does.

Phrasings are split in two pools. `sft` holds the demonstrations (instruction + target plan); `rl` holds further
phrasings whose prompts RL sees with their intent but never with a target plan, as in RLHF practice
(demonstrations are scarce, prompts with feedback are cheap). The held-out eval set (config/rlhf/heldout.jsonl)
is written by hand with phrasings in neither pool.
"""

from __future__ import annotations

import functools
import math
import random
import re
from collections.abc import Callable
from dataclasses import dataclass

from edge.instruct.plan import MAX_SEGMENTS, Plan, Segment, plan_metrics
from edge.instruct.prompt import state_summary
from edge.instruct.safety import MAX_INSTRUCTION_CHARS, PlanLimits, clamp_plan
from training.rlhf.intent import Expect, Steps, around, step_groups

POOLS = ("sft", "rl", "all")
SPEED, SLOW_SPEED, TURN_RATE, SLOW_TURN_RATE, ARC_SPEED, ARC_RATE = 1.0, 0.5, 1.0, 0.5, 0.5, 0.5
DEFAULT_TURN_DEG = 90


@dataclass(frozen=True)
class Example:
    instruction: str
    plan: Plan
    expect: Expect  # ranges over the whole plan
    state: str
    steps: Steps | None = None  # ranges over each step (intent.step_groups), in order


def _p(sft: list[str], rl: list[str]) -> dict[str, list[str]]:
    return {"sft": sft, "rl": rl, "all": sft + rl}


# {d} distance, {t} duration, {a} angle, {dir} left/right, {cdir} counterclockwise/clockwise, {vx}/{wz} numbers
MOVE = {
    1: _p(
        [
            "go forward {d}",
            "move forward {d}",
            "drive forward {d}",
            "go straight {d}",
            "move ahead {d}",
            "drive {d} forward",
            "go {d} forward",
            "forward {d}",
            "move forward by {d}",
            "drive straight {d}",
        ],
        [
            "advance {d}",
            "roll forward {d}",
            "proceed forward {d}",
            "head straight {d}",
            "travel {d} forward",
            "go ahead {d}",
            "move {d} ahead",
            "drive ahead by {d}",
            "continue forward {d}",
            "push forward {d}",
        ],
    ),
    -1: _p(
        [
            "go backward {d}",
            "move back {d}",
            "reverse {d}",
            "drive backwards {d}",
            "back up {d}",
            "move backward by {d}",
            "go back {d}",
        ],
        [
            "retreat {d}",
            "roll back {d}",
            "go in reverse for {d}",
            "travel {d} backwards",
            "back off {d}",
            "reverse by {d}",
            "move {d} to the rear",
        ],
    ),
}
MOVE_TIMED = {
    1: _p(
        [
            "go forward for {t}",
            "drive forward for {t}",
            "move ahead for {t}",
            "drive straight for {t}",
            "keep going forward for {t}",
        ],
        ["roll forward for {t}", "advance for {t}", "head forward for {t}", "proceed straight for {t}"],
    ),
    -1: _p(
        ["reverse for {t}", "back up for {t}", "drive backward for {t}", "go backwards for {t}"],
        ["roll backwards for {t}", "retreat for {t}", "move in reverse for {t}"],
    ),
}
SLOW = _p(["slowly {step}", "{step} slowly", "{step} at low speed"], ["gently {step}", "{step} carefully"])
TURN = _p(
    [
        "turn {dir} {a}",
        "rotate {dir} {a}",
        "turn {a} to the {dir}",
        "rotate {a} {cdir}",
        "spin {dir} {a}",
        "turn {dir} by {a}",
        "turn in place {a} to the {dir}",
        "turn {cdir} {a}",
    ],
    [
        "pivot {dir} {a}",
        "swing {dir} {a}",
        "yaw {dir} {a}",
        "rotate {cdir} by {a}",
        "make a {a} turn to the {dir}",
        "turn yourself {a} {dir}",
        "spin {a} {cdir}",
    ],
)
TURN_DEFAULT = _p(
    ["turn {dir}", "rotate {dir}", "turn to the {dir}", "turn {cdir}"],
    ["pivot {dir}", "face {dir}", "swing {dir}", "hang a {dir}"],
)
TURN_TIMED = _p(
    ["turn {dir} for {t}", "rotate {dir} for {t}", "spin {cdir} for {t}", "rotate {cdir} for {t}"],
    ["pivot {dir} for {t}", "yaw {dir} for {t}", "keep turning {dir} for {t}"],
)
TURN_AROUND = _p(["turn around", "do a u-turn", "turn back"], ["about face", "spin around", "face the other way"])
ARC = _p(
    [
        "drive forward while turning {dir} for {t}",
        "curve {dir} for {t}",
        "arc to the {dir} for {t}",
        "go forward and turn {dir} at the same time for {t}",
    ],
    ["veer {dir} for {t}", "bear {dir} for {t}", "make a {dir} curve for {t}", "drive in a {dir} arc for {t}"],
)
VELOCITY = _p(
    [
        "set linear x to {vx} and angular z to {wz} for {t}",
        "publish cmd_vel with linear.x {vx} and angular.z {wz} for {t}",
        "linear.x {vx} angular.z {wz} for {t}",
    ],
    [
        "command vx={vx} wz={wz} for {t}",
        "send a twist with linear x {vx} and angular z {wz} for {t}",
        "cmd_vel linear {vx} angular {wz} for {t}",
    ],
)
# one axis given alone (the other is zero)
VELOCITY_LINEAR = _p(
    ["set linear x to {vx} for {t}", "publish cmd_vel with linear.x {vx} for {t}"],
    ["command vx={vx} for {t}", "send a twist with linear x {vx} for {t}"],
)
VELOCITY_ANGULAR = _p(
    ["set angular z to {wz} for {t}", "publish cmd_vel with angular.z {wz} for {t}"],
    ["command wz={wz} for {t}", "send a twist with angular z {wz} for {t}"],
)
SPEED_TIMED = _p(
    ["drive at {vx} m/s for {t}", "move at {vx} meters per second for {t}"],
    ["go {vx} m/s for {t}", "travel at a speed of {vx} m/s for {t}"],
)
RATE_TIMED = _p(
    ["rotate at {wz} rad/s for {t}", "turn at {wz} radians per second for {t}"],
    ["yaw at {wz} rad/s for {t}", "spin at a rate of {wz} rad/s for {t}"],
)
WAIT = _p(
    ["wait {t}", "wait for {t}", "pause for {t}", "stay still for {t}", "hold position for {t}", "stop for {t}"],
    ["sit still for {t}", "remain stationary for {t}", "idle for {t}", "hang on for {t}", "hold on for {t}"],
)
STOP_PHRASES = _p(
    [
        "stop",
        "halt",
        "freeze",
        "stop now",
        "stop moving",
        "don't move",
        "do not move",
        "stay where you are",
        "stand still",
    ],
    [
        "cease moving",
        "come to a stop",
        "hold still",
        "that's enough, stop",
        "quit moving",
        "don't go anywhere",
        "stop right there",
    ],
)
CONNECT = _p(
    [" then ", ", then ", " and then ", ". then ", ", and then "],
    [", after that ", ", next ", " and afterwards ", "; then ", ", followed by "],
)
JOIN3 = _p(["first {}, then {}, then {}"], ["{}, {} and finally {}"])
FIRST = _p(["first {}"], ["to begin, {}"])
# a one-step instruction done n times. The held-out set's "{step} twice" is in neither pool: the model has to carry
# "twice" from these places to the end of a line.
REPEAT = {
    2: _p(
        ["{step} two times", "do this twice: {step}", "twice in a row, {step}"],
        ["{step} 2 times", "{step} and again"],
    ),
    3: _p(["{step} three times", "do this three times: {step}"], ["{step} 3 times", "three times over, {step}"]),
}
NEGATE = _p(
    ["don't {x}, {y}", "do not {x}, {y}", "{y}, don't {x}", "don't {x}, just {y}"],
    [
        "{y} instead of trying to {x}",
        "{y}, not {x}",
        "never mind {x}, {y}",
        "rather than {x}, {y}",
        "no need to {x}, {y}",
    ],
)
DISTRACTORS = [
    "turn",
    "turn left",
    "turn right",
    "go forward",
    "go backward",
    "move",
    "spin",
    "reverse",
    "rotate",
    "back up",
    "drive forward",
]
PREFIX = _p(
    ["please ", "robot, ", "can you ", "could you ", "now "],
    ["hey robot, ", "i want you to ", "would you ", "kindly ", "robot: "],
)
SUFFIX = _p([" please", " now", ".", "!"], [" thanks", " asap", " for me", " right away"])

# Unknown words. People use verbs and fillers no phrase list holds ("scoot", "swivel", "get moving"); a model that
# has only seen the list's verbs reads an unknown one as noise it never learnt to ignore. So some steps get their
# verb replaced by a made-up word (consonant-vowel syllables, never a word the corpus uses) when the rest of the
# step still says the direction, and some instructions get a made-up word inserted: the model learns to read
# direction words, numbers and units, and to treat an unknown verb with only a duration as a wait. Likewise some
# steps are joined by a made-up connector (", kabo "): a second clause after any word is a second step.
UNKNOWN_VERB_P, UNKNOWN_FILLER_P, UNKNOWN_CONNECTOR_P = 0.2, 0.15, 0.15
REPEAT_P = 0.06  # share of one-step instructions said to be done two or three times
# "a bit": a small move or turn, a fixed amount (the plan is the same each time; people accept 0.1-0.5 m, 6-34 deg)
SMALL_AMOUNT = _p(["a bit", "a little"], ["a little bit", "a touch"])
SMALL_P, SMALL_DISTANCE_M, SMALL_ANGLE_RAD = 0.05, 0.3, 0.3
STOP_ENDING_P = 0.07  # share of instructions that end in a stop ("go forward 1 m, then stand still"): no extra step
PLAIN_VERBS = frozenset(
    {
        "go",
        "move",
        "drive",
        "turn",
        "rotate",
        "spin",
        "roll",
        "head",
        "travel",
        "proceed",
        "continue",
        "push",
        "pivot",
        "swing",
        "yaw",
        "keep",
        "wait",
        "pause",
        "idle",
        "hold",
        "remain",
        "sit",
        "stay",
    }
)
DIRECTION_WORDS = frozenset(
    {
        "forward",
        "ahead",
        "straight",
        "back",
        "backward",
        "backwards",
        "reverse",
        "rear",
        "left",
        "right",
        "clockwise",
        "counterclockwise",
        "around",
    }
)
_SYLLABLE_CONSONANTS, _SYLLABLE_VOWELS = "bdfgklmnprstvz", "aeiou"
NUMBER_WORDS = {
    1: "one",
    2: "two",
    3: "three",
    4: "four",
    5: "five",
    6: "six",
    7: "seven",
    8: "eight",
    9: "nine",
    10: "ten",
}
DISTANCES_M = [round(0.1 * i, 1) for i in range(1, 10)] + [1, 1.2, 1.5, 2, 2.5, 3, 3.5, 4, 4.5, 5, 6, 7, 8, 10]
_NUMBER_WORD_SET = frozenset(NUMBER_WORDS.values())
DURATIONS_S = [0.5, 1, 1.5, 2, 2.5, 3, 3.5, 4, 5, 6, 7, 8, 10]
COMMON_DEG = [15, 30, 45, 60, 90, 120, 135, 180, 270, 360]
RADIANS = [0.5, 1, 1.5, 2, 2.5, 3]
VX_VALUES = [round(0.1 * i, 1) for i in range(1, 11)] + [1.5, 2, 5, 10, 100]  # > 1: clamped in the target
WZ_VALUES = [round(0.1 * i, 1) for i in range(1, 16)] + [2, 3, 10]


def _num(x: float) -> str:
    return f"{x:g}"


def _count(x: float, unit: str, plural: str, rng: random.Random) -> str:
    """'2 meters', 'two meters', '1 meter', '0.5 meters'."""
    if float(x).is_integer() and x in NUMBER_WORDS and rng.random() < 0.25:
        text = NUMBER_WORDS[int(x)]
    else:
        text = _num(x)
    return f"{text} {unit if x == 1 else plural}"


def _distance_text(d: float, rng: random.Random) -> str:
    r = rng.random()
    if d == 0.5 and r < 0.1:
        return "half a meter"
    if d == 1 and r < 0.1:
        return "a meter"
    if d < 3.05 and r < 0.35:
        cm = round(d * 100)
        return rng.choice([f"{cm} cm", f"{cm}cm", f"{cm} centimeters", f"{cm} centimetres"])
    if d < 1.05 and r < 0.42:
        return f"{round(d * 1000)} mm"
    return rng.choice(
        [f"{_num(d)} m", f"{_num(d)}m", _count(d, "meter", "meters", rng), _count(d, "metre", "metres", rng)]
    )


def _duration_text(t: float, rng: random.Random) -> str:
    r = rng.random()
    if t < 1.05 and r < 0.15:
        return f"{round(t * 1000)} ms"
    if t == 1 and r < 0.25:
        return "a second"
    return rng.choice([f"{_num(t)} s", f"{_num(t)}s", f"{_num(t)} sec", _count(t, "second", "seconds", rng)])


def _angle_text(deg: float, rng: random.Random) -> tuple[str, float]:
    """Text and the angle in radians it means."""
    r = rng.random()
    if deg == 90 and r < 0.15:
        return "a quarter turn", math.pi / 2
    if deg == 180 and r < 0.15:
        return "a half turn", math.pi
    if deg == 360 and r < 0.15:
        return "a full turn", 2 * math.pi
    if r < 0.15:
        rad = rng.choice(RADIANS)
        return rng.choice([f"{_num(rad)} rad", f"{_num(rad)} radians"]), rad
    return rng.choice([f"{deg} degrees", f"{deg} deg", f"{deg}°"]), math.radians(deg)


def _sample_degrees(rng: random.Random) -> int:
    return rng.choice(COMMON_DEG) if rng.random() < 0.6 else 5 * rng.randint(1, 72)


@dataclass
class _Step:
    text: str
    segments: list[Segment]
    timed: bool  # the instruction fixes the duration (it belongs to the intent)
    fields: tuple[str, ...] = ()  # mean-velocity fields that belong to the intent of a one-step plan


class CorpusGenerator:
    """Random examples from one phrasing pool; `limits` are the robot's (targets are clamped to them).
    `made_up_words` False: no made-up verbs, fillers or connectors (training wants them; people rating plans on the
    preference page want phrasings a person would write)."""

    def __init__(self, pool: str = "sft", limits: PlanLimits | None = None, seed: int = 0, made_up_words: bool = True):
        if pool not in POOLS:
            raise ValueError(f"pool must be one of {', '.join(POOLS)}")
        self.pool, self.limits, self.rng = pool, limits or PlanLimits(), random.Random(seed)
        self.made_up_words = made_up_words
        self._steps: list[tuple[float, Callable[[], _Step]]] = [
            (3, self._move),
            (1.5, self._move_timed),
            (3, self._turn),
            (1, self._turn_timed),
            (0.7, self._arc),
            (0.8, self._velocity),
            (0.6, self._wait),
        ]

    def _pick(self, table: dict[str, list[str]]) -> str:
        return self.rng.choice(table[self.pool])

    def _seg(self, vx: float = 0.0, wz: float = 0.0, t: float = 0.0) -> Segment:
        lim = self.limits
        return Segment(min(max(vx, lim.vx[0]), lim.vx[1]), 0.0, min(max(wz, lim.wz[0]), lim.wz[1]), t)

    def _halves(self, vx: float, wz: float, t: float) -> list[Segment]:
        """A distance or angle at half the default speed: two segments as long as the number in the instruction
        (1.5 m slowly: 2 x 1.5 s at 0.5 m/s), so the model copies the number instead of doubling it."""
        return [self._seg(vx, wz, t), self._seg(vx, wz, t)]

    # ------------------------------------------------------------------ single steps
    def _move(self) -> _Step:
        rng, sign = self.rng, rng_sign(self.rng, 0.75)
        if rng.random() < SMALL_P:
            text = self._pick(MOVE[sign]).format(d=self._pick(SMALL_AMOUNT))
            return _Step(text, [self._seg(sign * SPEED, t=SMALL_DISTANCE_M / SPEED)], False)
        d = rng.choice(DISTANCES_M)
        text = self._pick(MOVE[sign]).format(d=_distance_text(d, rng))
        if d <= 5 and rng.random() < 0.15:
            return _Step(self._pick(SLOW).format(step=text), self._halves(sign * SLOW_SPEED, 0.0, d), False, ("vx",))
        return _Step(text, [self._seg(sign * SPEED, t=d / SPEED)], False)

    def _move_timed(self) -> _Step:
        rng, sign = self.rng, rng_sign(self.rng, 0.7)
        t = rng.choice(DURATIONS_S)
        text = self._pick(MOVE_TIMED[sign]).format(t=_duration_text(t, rng))
        if rng.random() < 0.25:
            return _Step(self._pick(SLOW).format(step=text), [self._seg(sign * SLOW_SPEED, t=t)], True, ("vx",))
        return _Step(text, [self._seg(sign * SPEED, t=t)], True, ("vx",))

    def _turn(self) -> _Step:
        rng, sign = self.rng, rng_sign(self.rng, 0.5)
        words = {"dir": "left" if sign > 0 else "right", "cdir": "counterclockwise" if sign > 0 else "clockwise"}
        r = rng.random()
        if r < 0.12:
            text, rad = self._pick(TURN_DEFAULT).format(**words), math.radians(DEFAULT_TURN_DEG)
        elif r < 0.2:
            text, rad, sign = self._pick(TURN_AROUND), math.pi, 1
        elif r < 0.2 + SMALL_P:
            template = self.rng.choice([t for t in TURN[self.pool] if "a {a}" not in t])  # not "make a a bit turn"
            text, rad = template.format(a=self._pick(SMALL_AMOUNT), **words), SMALL_ANGLE_RAD
        else:
            angle, rad = _angle_text(_sample_degrees(rng), rng)
            text = self._pick(TURN).format(a=angle, **words)
        if rng.random() < 0.1:
            return _Step(
                self._pick(SLOW).format(step=text), self._halves(0.0, sign * SLOW_TURN_RATE, rad), False, ("wz",)
            )
        return _Step(text, [self._seg(wz=sign * TURN_RATE, t=rad / TURN_RATE)], False)

    def _turn_timed(self) -> _Step:
        rng, sign = self.rng, rng_sign(self.rng, 0.5)
        t = rng.choice(DURATIONS_S[:8])
        words = {"dir": "left" if sign > 0 else "right", "cdir": "counterclockwise" if sign > 0 else "clockwise"}
        text = self._pick(TURN_TIMED).format(t=_duration_text(t, rng), **words)
        return _Step(text, [self._seg(wz=sign * TURN_RATE, t=t)], True, ("wz",))

    def _arc(self) -> _Step:
        rng, sign = self.rng, rng_sign(self.rng, 0.5)
        t = rng.choice(DURATIONS_S[:9])
        text = self._pick(ARC).format(dir="left" if sign > 0 else "right", t=_duration_text(t, rng))
        return _Step(text, [self._seg(ARC_SPEED, sign * ARC_RATE, t)], True, ("vx", "wz"))

    def _velocity(self) -> _Step:
        rng = self.rng
        t = rng.choice(DURATIONS_S)
        vx = rng.choice(VX_VALUES) * rng_sign(rng, 0.7)
        wz = rng.choice(WZ_VALUES) * rng_sign(rng, 0.5)
        r = rng.random()
        if r < 0.4:
            vx = 0.0 if rng.random() < 0.2 else vx
            wz = 0.0 if rng.random() < 0.3 else wz
            table = VELOCITY
            if (vx == 0) != (wz == 0) and rng.random() < 0.5:
                table = VELOCITY_ANGULAR if vx == 0 else VELOCITY_LINEAR
            text = self._pick(table).format(vx=_num(vx), wz=_num(wz), t=_duration_text(t, rng))
        elif r < 0.75:
            wz = 0.0
            text = self._pick(SPEED_TIMED).format(vx=_num(abs(vx)), t=_duration_text(t, rng))
            vx = abs(vx)
        else:
            vx = 0.0
            text = self._pick(RATE_TIMED).format(wz=_num(wz), t=_duration_text(t, rng))
        # written as asked, not clamped: the model reads numbers as slots and cannot see that 5 m/s is too fast;
        # the guard clamps the plan (safety.clamp_plan) and the intent is what the clamped plan does
        return _Step(text, [Segment(vx, 0.0, wz, t)], True, ("vx", "wz"))

    def _wait(self) -> _Step:
        t = self.rng.choice(DURATIONS_S)
        return _Step(self._pick(WAIT).format(t=_duration_text(t, self.rng)), [self._seg(t=t)], True)

    def _repeated(self, step: _Step) -> _Step:
        """`step` two or three times; as it is when it is a wait or when that would not fit a plan."""
        n = self.rng.choice(list(REPEAT))
        duration = n * sum(s.duration_s for s in step.segments)
        still = all(s.vx == 0 and s.wz == 0 for s in step.segments)
        if still or n * len(step.segments) > MAX_SEGMENTS or duration > self.limits.max_duration_s:
            return step
        return _Step(self._pick(REPEAT[n]).format(step=step.text), step.segments * n, step.timed, step.fields)

    def _step(self) -> _Step:
        weights = [w for w, _ in self._steps]
        step = self.rng.choices([f for _, f in self._steps], weights)[0]()
        words = step.text.split(" ")
        timed_wait = all(s.vx == 0 and s.wz == 0 for s in step.segments)
        if (
            self.made_up_words
            and self.rng.random() < UNKNOWN_VERB_P
            and words[0] in PLAIN_VERBS
            and (timed_wait or DIRECTION_WORDS.intersection(words[1:]))
        ):
            step.text = " ".join([self._unknown_word(), *words[1:]])
        return step

    def _unknown_word(self) -> str:
        """A made-up word: 2-3 consonant-vowel syllables, never one the corpus itself uses."""
        rng = self.rng
        while True:
            word = "".join(
                rng.choice(_SYLLABLE_CONSONANTS) + rng.choice(_SYLLABLE_VOWELS) for _ in range(rng.randint(2, 3))
            )
            if word not in _corpus_words():
                return word

    def _with_unknown_filler(self, text: str) -> str:
        """`text` with a made-up word at a random place that does not split a number or a unit ("rad per s")."""
        words = text.split(" ")
        places = [
            i
            for i in range(len(words) + 1)
            if (i == 0 or words[i - 1].isalpha() and words[i - 1] not in _NUMBER_WORD_SET | {"per"})
            and (i == len(words) or words[i] != "per")
        ]
        at = self.rng.choice(places)
        return " ".join([*words[:at], self._unknown_word(), *words[at:]])

    # ------------------------------------------------------------------ whole instructions
    def example(self) -> Example:
        """One instruction and its plan. A stop command alone is never one: the screen (safety.is_stop) stops it
        before any model sees it. A stop after a move ("... then stop") is, and adds no step: a plan ends at rest."""
        rng = self.rng
        steps = [self._step() for _ in range(rng.choices([1, 2, 3, 4], [0.5, 0.28, 0.14, 0.08])[0])]
        plan = tuple(s for step in steps for s in step.segments)
        text = self._join([s.text for s in steps])
        # a plan the robot would cut, or a text the screen would cut (room left for fillers): its first step
        if (
            sum(s.duration_s for s in plan) > self.limits.max_duration_s
            or len(plan) > MAX_SEGMENTS
            or len(text) > MAX_INSTRUCTION_CHARS - 40
        ):
            steps, plan, text = steps[:1], tuple(steps[0].segments), steps[0].text
        if len(steps) == 1 and rng.random() < REPEAT_P:
            steps = [self._repeated(steps[0])]
            plan, text = tuple(steps[0].segments), steps[0].text
        if len(steps) == 1 and rng.random() < 0.15:
            text = self._pick(NEGATE).format(x=rng.choice(DISTRACTORS), y=text)
        if rng.random() < STOP_ENDING_P:
            ending = self._pick(CONNECT) + self._pick(STOP_PHRASES)
            if len(text + ending) <= MAX_INSTRUCTION_CHARS - 40:
                text += ending
        clamped = clamp_plan(plan, self.limits)[0]
        expect = intent_expect(clamped, all(s.timed for s in steps), steps[0].fields if len(steps) == 1 else ())
        if self.made_up_words and rng.random() < UNKNOWN_FILLER_P:
            text = self._with_unknown_filler(text)
        if rng.random() < 0.25:
            text = self._pick(PREFIX) + text
        if rng.random() < 0.2:
            text += self._pick(SUFFIX)
        moving = rng.random() < 0.4
        state = state_summary(
            rng.choice([0.2, 0.5, 1.0, -0.3]) if moving else 0.0, rng.choice([0.0, 0.5, -0.5]) if moving else 0.0
        )
        return Example(text, plan, expect, state, step_expects(clamped, steps))

    def _join(self, texts: list[str]) -> str:
        if len(texts) == 1:
            return texts[0]
        if len(texts) == 3 and self.rng.random() < 0.3:
            return self._pick(JOIN3).format(*texts)
        if self.rng.random() < 0.15:
            texts = [self._pick(FIRST).format(texts[0]), *texts[1:]]
        out = texts[0]
        for t in texts[1:]:
            if self.made_up_words and self.rng.random() < UNKNOWN_CONNECTOR_P:
                out += self.rng.choice([", ", " ", " and "]) + self._unknown_word() + " " + t
            else:
                out += self._pick(CONNECT) + t
        return out

    def examples(self, n: int) -> list[Example]:
        return [self.example() for _ in range(n)]


@functools.cache
def _corpus_words() -> frozenset[str]:
    tables = (
        *MOVE.values(),
        *MOVE_TIMED.values(),
        SLOW,
        TURN,
        TURN_DEFAULT,
        TURN_TIMED,
        TURN_AROUND,
        ARC,
        VELOCITY,
        VELOCITY_LINEAR,
        VELOCITY_ANGULAR,
        SPEED_TIMED,
        RATE_TIMED,
        WAIT,
        STOP_PHRASES,
        CONNECT,
        JOIN3,
        FIRST,
        *REPEAT.values(),
        NEGATE,
        PREFIX,
        SUFFIX,
        SMALL_AMOUNT,
    )
    text = " ".join(p for t in tables for p in t["all"]) + " " + " ".join([*DISTRACTORS, *NUMBER_WORDS.values()])
    return frozenset(re.findall(r"[a-z]+", text))


def rng_sign(rng: random.Random, p_positive: float) -> int:
    return 1 if rng.random() < p_positive else -1


def intent_expect(plan: Plan, timed: bool, fields: tuple[str, ...] = ()) -> Expect:
    """Ranges a correct plan meets: distance and angle always, the duration when the instruction fixes it, mean
    velocities when a one-step instruction sets them (a speed, a slow modifier, an arc)."""
    m = plan_metrics(plan)
    expect: Expect = {"distance_m": around(m["distance_m"]), "angle_rad": around(m["angle_rad"])}
    if timed:
        expect["duration_s"] = around(m["duration_s"], abs_tol=0.1)
    for f in fields:
        expect[f] = around(m[f], rel=0.2, abs_tol=0.1)
    return expect


def step_expects(plan: Plan, steps: list[_Step]) -> Steps:
    """The intent of each step of the (clamped) target plan: the ranges intent_expect gives a one-step plan. Two
    corpus steps the target merges into one (the same velocities back to back) keep what both fix."""
    tags = [(step.timed, step.fields) for step in steps for _ in step.segments]
    out = []
    for group in step_groups(plan):
        timed = all(tags[i][0] for i in group)
        fields = tuple(f for f in tags[group[0]][1] if all(f in tags[i][1] for i in group))
        out.append(intent_expect(tuple(plan[i] for i in group), timed, fields))
    return tuple(out)
