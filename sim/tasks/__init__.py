"""Tasks: what a robot is asked to learn, kept apart from the robot (sim.robot). A task is a tree of config
dataclasses (VelocityTaskConfig: observation, reward and termination terms, commands, episode, reset,
randomisation) over term functions in sim.tasks.terms; config/tasks/velocity_<robot>.yaml sets it per robot.

    from sim.robot import load_robot
    from sim.tasks import RewardTerm, load_task
    from sim.tasks.terms import REWARDS

    robot = load_robot("quadruped")
    task = load_task(robot)  # config/tasks/velocity_quadruped.yaml over default_task(robot)
    rewards = {**task.rewards, "lin_vel_z": RewardTerm(REWARDS["lin_vel_z"], weight=-4.0)}
    BatchedTwin(robot, task=dataclasses.replace(task, rewards=rewards))  # sim.twin
"""

from sim.tasks.config import (
    FeetConfig,
    ObservationTerm,
    ResetConfig,
    RewardTerm,
    TerminationTerm,
    VelocityCommand,
    VelocityTaskConfig,
    check_task,
    default_task,
)
from sim.tasks.loader import load_task, task_path
from sim.tasks.velocity_tracking import VelocityTrackingTask

__all__ = [
    "FeetConfig",
    "ObservationTerm",
    "ResetConfig",
    "RewardTerm",
    "TerminationTerm",
    "VelocityCommand",
    "VelocityTaskConfig",
    "VelocityTrackingTask",
    "check_task",
    "default_task",
    "load_task",
    "task_path",
]
