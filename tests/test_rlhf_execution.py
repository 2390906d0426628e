"""Plans executed in the twin through a trained policy artifact (how a legged robot's plans are judged: no
hand-written controller walks it), shown on the rover beside its wheel controller; a robot with neither, or a
policy of another robot, is refused in one line."""

import pytest

from edge.instruct.plan import Segment
from training.errors import TrainingError
from training.rlhf.execution import TwinExecutor

PLANS = [(Segment(0.5, 0.0, 0.0, 2.0),), (Segment(0.0, 0.0, 0.8, 2.0),), (Segment(0.4, 0.0, 0.0, 1.5), Segment())]


def test_a_trained_policy_executes_the_plans(trained_rover):
    by_policy = TwinExecutor("rover", policy=str(trained_rover)).execute(PLANS)
    forward, turn, then_stop = (run.metrics for run in by_policy)
    # a policy trained to the tracking threshold only (|error| < 0.1 m/s) overshoots a step by about a quarter
    assert 0.7 < forward["distance_m"] < 1.4 and abs(forward["angle_rad"]) < 0.3
    assert 1.2 < turn["angle_rad"] < 2.4 and abs(turn["distance_m"]) < 0.4
    assert 0.45 < then_stop["distance_m"] < 1.0
    # what drove was the policy, not the wheel controller (which tracks these plans to a few percent)
    by_controller = TwinExecutor("rover").execute(PLANS)
    assert by_controller[0].metrics["distance_m"] == pytest.approx(1.0, abs=0.05)
    assert any(
        abs(p.metrics[k] - c.metrics[k]) > 0.05
        for p, c in zip(by_policy, by_controller, strict=True)
        for k in ("distance_m", "angle_rad")
    )


def test_a_robot_without_the_wheel_controller_needs_a_policy_of_its_own(trained_rover):
    with pytest.raises(TrainingError, match="quadruped has none: give a trained policy artifact"):
        TwinExecutor("quadruped")
    with pytest.raises(TrainingError, match="exported for robot 'rover'"):
        TwinExecutor("quadruped", policy=str(trained_rover))
