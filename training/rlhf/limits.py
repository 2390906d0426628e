"""Plan limits from a robot YAML: the training side's limits (the robot side reads them from the artifact's
manifest, edge.instruct.safety.limits_from_manifest)."""

from __future__ import annotations

from edge.instruct.safety import PlanLimits


def limits_for(robot: str = "rover", max_duration_s: float = 30.0) -> PlanLimits:
    """The command limits of a robot YAML (a name or a path)."""
    from sim.robot import load_robot

    return PlanLimits.from_command_limits(load_robot(robot).command_limits, max_duration_s)
