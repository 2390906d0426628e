"""Term functions of the tasks, written once over the backends' state arrays, and their registries (the names a
task YAML may use): REWARDS, OBSERVATIONS, TERMINATIONS.

    from sim.tasks.terms import REWARDS, TermContext
    REWARDS["lin_vel_z"](TermContext(robot, state))  # [N]: vertical base velocity squared
"""

from sim.tasks.terms.commands import VelocityCommandTerm
from sim.tasks.terms.context import TermContext, base_velocities
from sim.tasks.terms.feet import FootTracker
from sim.tasks.terms.observations import OBSERVATIONS
from sim.tasks.terms.rewards import CLOCK_TERMS, FOOT_TERMS, REWARDS
from sim.tasks.terms.terminations import TERMINATIONS

__all__ = [
    "CLOCK_TERMS",
    "FOOT_TERMS",
    "OBSERVATIONS",
    "REWARDS",
    "TERMINATIONS",
    "FootTracker",
    "TermContext",
    "VelocityCommandTerm",
    "base_velocities",
]
