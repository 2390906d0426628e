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

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'sim' has no attribute {name!r}")
