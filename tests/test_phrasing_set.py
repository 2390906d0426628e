"""The hand-written phrasing set (config/rlhf/phrasings.jsonl): how different people would talk to the rover (terse,
polite, shouting, typos, relative amounts, units in words, chains, stops inside sentences, speeds, waits and mixes).
It loads as an eval set, no line is a held-out line or one the corpus generator can write, and each line's ranges
are consistent: the plan a careful reader means passes them."""

import re

from edge.instruct.plan import STOP, Segment
from edge.instruct.safety import PlanLimits, clamp_plan, clean_instruction, is_stop
from tests.test_rlhf_plan import _producible_with_unknown_words
from training.rlhf.corpus import PREFIX, SPEED, SUFFIX, TURN_RATE
from training.rlhf.evaluate import EvalItem, load_eval_set
from training.rlhf.intent import Expect, plan_passes

PHRASINGS = "config/rlhf/phrasings.jsonl"
HELDOUT = "config/rlhf/heldout.jsonl"
LIMITS = PlanLimits()  # the rover's: vx [-1, 1], vy 0, wz [-1.5, 1.5], 30 s
MAX_STOP_ONLY = 4  # lines made only of stop words never reach the model (safety.is_stop)


def _mid(rng: tuple[float, float]) -> float:
    return (rng[0] + rng[1]) / 2


def _segment(e: Expect) -> Segment | None:
    """The step a careful reader means by `e`: the middle of its ranges, at the stated speed, else the corpus'
    defaults (1 m/s, 1 rad/s); None for a step of no duration (a stop)."""
    distance, angle = (_mid(e[k]) if k in e else 0.0 for k in ("distance_m", "angle_rad"))
    vx, wz = (abs(_mid(e[k])) if k in e else default for k, default in (("vx", SPEED), ("wz", TURN_RATE)))
    if "duration_s" in e:
        duration = _mid(e["duration_s"])
    else:
        duration = max(abs(distance) / vx if distance else 0.0, abs(angle) / wz if angle else 0.0)
    return Segment(distance / duration, 0.0, angle / duration, duration) if duration > 0 else None


def _meant_plan(item: EvalItem) -> tuple[Segment, ...]:
    segments = tuple(s for e in (item.steps or (item.expect,)) if (s := _segment(e)) is not None)
    return segments or STOP


def test_phrasings_load_as_an_eval_set_of_new_unique_lines():
    items = load_eval_set(PHRASINGS)
    assert len(items) >= 150 and sum(1 for _ in open(PHRASINGS)) == len(items)
    clean = [clean_instruction(i.instruction)[0] for i in items]
    assert len(set(clean)) == len(clean) == len({i.instruction for i in items})
    heldout = {clean_instruction(i.instruction)[0] for i in load_eval_set(HELDOUT)}
    assert not heldout.intersection(clean), sorted(heldout.intersection(clean))
    assert all(len(i.instruction) < 160 for i in items)


def test_every_multi_step_line_judges_each_step():
    items = load_eval_set(PHRASINGS)
    assert sum(i.steps is not None and 2 <= len(i.steps) <= 4 for i in items) >= 40
    assert all(i.steps is None or 2 <= len(i.steps) <= 4 for i in items)
    for i in items:
        # a rover: no lateral move in any range
        assert all("vy" not in e for e in (i.expect, *(i.steps or ()))), i.instruction
        if i.steps is None:  # one step: anything after "then" is a stop, which adds no step
            text = clean_instruction(i.instruction)[0]
            assert all(is_stop(rest) for rest in re.split(r"\bthen\b", text)[1:]), i.instruction


def test_phrasings_are_in_neither_pool():
    """As for the held-out set (test_rlhf_plan.test_heldout_phrasings_are_in_neither_pool): the corpus generator
    cannot write any line, with or without its prefixes, suffixes and made-up words."""
    prefix = "|".join(re.escape(p) for p in PREFIX["all"])
    suffix = "|".join(re.escape(s) for s in SUFFIX["all"])
    for item in load_eval_set(PHRASINGS):
        text = clean_instruction(item.instruction)[0]
        core = re.sub(rf"({suffix})$", "", re.sub(rf"^({prefix})", "", text))
        assert not _producible_with_unknown_words(text) and not _producible_with_unknown_words(core), item.instruction


def test_each_line_is_met_by_the_plan_a_careful_reader_means():
    """Each line's totals and steps agree: the plan built from the middle of its step ranges (at the stated speed or
    the defaults) passes them all, unclamped. A line made only of stop words is a stop (it never reaches the
    model); there are at most a few of those."""
    items = load_eval_set(PHRASINGS)
    stops = [i for i in items if is_stop(i.instruction)]
    assert 1 <= len(stops) <= MAX_STOP_ONLY
    for item in items:
        plan = _meant_plan(item)
        clamped, warnings = clamp_plan(plan, LIMITS)
        assert not warnings, (item.instruction, warnings)
        assert plan_passes(clamped, item.expect, item.steps), item.instruction
        assert (plan == STOP) == is_stop(item.instruction), item.instruction
