"""Digital twins: robots (MJCF plus constants, sim.robot), tasks (config trees of terms, sim.tasks), the batched
twin (sim.twin), domain randomisation, physics backends, KPIs and validation campaigns (sim.campaign).

    from sim import BatchedTwin, load_robot, load_task

    robot = load_robot("quadruped")  # config/robots/quadruped.yaml + sim/assets/quadruped.xml
    task = load_task(robot)  # config/tasks/velocity_quadruped.yaml: rewards, observations, terminations, ...
    twin = BatchedTwin(robot, task=task, num_envs=256, seed=0)  # task=None does the same
    obs, info = twin.reset()
    obs, reward, terminated, truncated, info = twin.step(actions)  # info["reward_terms"], info["tracking_error"]

The names below are imported on first use, so `import sim.errors` does not load MuJoCo.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the names as a type checker reads them; at run time __getattr__ imports each on first use
    from sim.errors import CampaignError, RobotConfigError, SimError
    from sim.randomization import PhysicsParams, RandomizationConfig
    from sim.robot import CommandLimits, RobotSpec, load_robot
    from sim.tasks import (
        ObservationTerm,
        ResetConfig,
        RewardTerm,
        TerminationTerm,
        VelocityCommand,
        VelocityTaskConfig,
        default_task,
        load_task,
    )
    from sim.twin import BatchedTwin

_EXPORTS = {
    "BatchedTwin": "sim.twin",
    "CommandLimits": "sim.robot",
    "RobotSpec": "sim.robot",
    "load_robot": "sim.robot",
    "ObservationTerm": "sim.tasks",
    "ResetConfig": "sim.tasks",
    "RewardTerm": "sim.tasks",
    "TerminationTerm": "sim.tasks",
    "VelocityCommand": "sim.tasks",
    "VelocityTaskConfig": "sim.tasks",
    "default_task": "sim.tasks",
    "load_task": "sim.tasks",
    "PhysicsParams": "sim.randomization",
    "RandomizationConfig": "sim.randomization",
    "CampaignError": "sim.errors",
    "RobotConfigError": "sim.errors",
    "SimError": "sim.errors",
}

__all__ = [  # _EXPORTS's names, written out so that a type checker reads them
    "BatchedTwin",
    "CampaignError",
    "CommandLimits",
    "ObservationTerm",
    "PhysicsParams",
    "RandomizationConfig",
    "ResetConfig",
    "RewardTerm",
    "RobotConfigError",
    "RobotSpec",
    "SimError",
    "TerminationTerm",
    "VelocityCommand",
    "VelocityTaskConfig",
    "default_task",
    "load_robot",
    "load_task",
]


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'sim' has no attribute {name!r}")
