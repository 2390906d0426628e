"""The velocity task as a tree of config dataclasses, as mjlab and MuJoCo Playground keep a task apart from its
robot: observation, reward and termination terms (each a function, parameters and, for rewards, a weight),
the command term, the episode, the reset distribution and domain randomisation.

`default_task(robot)` is legged_gym's flat-terrain task for any robot; config/tasks/velocity_<robot>.yaml
changes it per robot (sim.tasks.loader). Term functions live in sim.tasks.terms.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from edge.config import setting
from edge.observation import DEFAULT_TERMS, ObsTerm, obs_term
from sim.errors import SimError
from sim.randomization import RandomizationConfig
from sim.robot import CommandLimits, RobotSpec
from sim.symmetry import diagonal_pairs
from sim.tasks.terms import CLOCK_TERMS, FOOT_TERMS, OBSERVATIONS, REWARDS, TERMINATIONS
from sim.terrain import TerrainConfig

TERMINATION = REWARDS["termination"]
TermFunc = Callable[..., np.ndarray]  # func(ctx: TermContext, **params)


@dataclass(frozen=True)
class ObservationTerm:
    func: TermFunc  # -> [N, size], physical units; the name's scale and noise come from edge.observation
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RewardTerm:
    func: TermFunc  # -> [N]; the reward is func(ctx, **params) * weight * control_dt
    weight: float
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class TerminationTerm:
    func: TermFunc  # -> [N] bool
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class VelocityCommand:
    resample_s: float = 10.0  # a new command every resample_s of an episode (and at reset)
    stand_still_share: float = 0.1  # share of the draws set to zero
    ranges: CommandLimits | None = None  # within the robot's command_limits; None: all of them
    # the commands the robot was given in the field, rows of (vx, vy, wz, share of the logged time), and the share
    # of the draws taken from them: a fine-tuning's (PPOConfig.duty_share), not a task YAML's
    duty: tuple[tuple[float, float, float, float], ...] = ()
    duty_share: float = 0.0


@dataclass(frozen=True)
class ResetConfig:
    """The reset distribution: the base starts level at the robot's base_height (above the terrain) with a uniformly
    random heading, the joints and base velocities with uniform noise."""

    joint_pos_noise: float = setting(
        0.1, "in rad, uniform around the default pose; position-controlled robots only", ge=0
    )
    base_velocity_noise: float = setting(0.05, "in m/s and rad/s, uniform on each base velocity axis", ge=0)


@dataclass(frozen=True)
class FeetConfig:
    """How the foot terms and gait KPIs read the robot's feet (the robot YAML's `feet`)."""

    contact_force_n: float = setting(1.0, "a foot is in contact above this contact force, in N", gt=0)


@dataclass(frozen=True)
class VelocityTaskConfig:
    observations: dict[str, ObservationTerm]  # policy input in this order (the manifest's layout)
    rewards: dict[str, RewardTerm]  # info["reward_terms"] in this order; a zero weight turns a term off
    terminations: dict[str, TerminationTerm]  # an env terminates when any term is True
    commands: VelocityCommand = field(default_factory=VelocityCommand)
    episode_length_s: float = 20.0  # then the episode is truncated
    # legged_gym's only_positive_rewards: a step's negative total becomes 0, and the termination term is added
    # after that clip so a fall still costs. Early on the penalties of a stumbling gait outweigh its tracking, and
    # without the clip standing still is the policy's best answer (Playground clips at 0 as well).
    only_positive_rewards: bool = False
    reset: ResetConfig = field(default_factory=ResetConfig)
    randomization: RandomizationConfig = field(default_factory=RandomizationConfig)
    feet: FeetConfig = field(default_factory=FeetConfig)
    terrain: TerrainConfig = field(default_factory=TerrainConfig)  # none by default: the robot's own floor

    @property
    def foot_terms(self) -> list[str]:
        """The reward terms that read the feet (sim.tasks.terms.FOOT_TERMS), in order."""
        return [name for name, term in self.rewards.items() if term.func in FOOT_TERMS and term.weight != 0.0]

    def without_foot_terms(self) -> VelocityTaskConfig:
        """This task without the terms that need sensed feet (for a backend without them: TwinBackend.feet)."""
        return dataclasses.replace(self, rewards={k: v for k, v in self.rewards.items() if k not in self.foot_terms})

    def obs_terms(self, num_joints: int) -> list[ObsTerm]:
        """The observation layout (name, size, scale, noise, ROS source per term) the exported manifest records."""
        return [obs_term(name, num_joints) for name in self.observations]

    # The fall criterion of the terminations, for the KPIs that score falls the way the twin terminates.
    @property
    def min_base_height(self) -> float:
        """base_too_low's min_base_height (above the terrain under the base); -inf without that term."""
        return _fall_param(self, TERMINATIONS["base_too_low"], "min_base_height", -math.inf)

    @property
    def max_tilt_rad(self) -> float:
        """tilted's max_tilt_rad; pi (no tilt terminates) without that term."""
        return _fall_param(self, TERMINATIONS["tilted"], "max_tilt_rad", math.pi)

    def total_reward(self, terms: dict[str, np.ndarray]) -> np.ndarray:
        """A step's reward from its weighted terms (VelocityTrackingTask.reward_terms), clipped as configured."""
        total = np.sum(list(terms.values()), axis=0)
        if not self.only_positive_rewards:
            return total
        fall = sum(terms[name] for name, t in self.rewards.items() if t.func is TERMINATION and name in terms)
        return np.maximum(total - fall, 0.0) + fall


def _fall_param(cfg: VelocityTaskConfig, func: TermFunc, key: str, absent: float) -> float:
    return next((float(t.params[key]) for t in cfg.terminations.values() if t.func is func), absent)


def default_task(robot: RobotSpec) -> VelocityTaskConfig:
    """legged_gym's flat-terrain base-velocity task: observations by control mode (edge.observation.DEFAULT_TERMS),
    commands over the robot's whole command envelope, and for a robot with feet legged_gym's only_positive_rewards,
    without which a legged robot learns to stand before it learns to step, plus its gait terms:
    - four feet in two diagonal pairs (sim.symmetry.diagonal_pairs): MuJoCo mjbatch's trot clock, gait_phase in
      the observation and gait_phase_contact (2.0) in the rewards; the quadruped reached tracking plus gait in a
      median of 173 s with it, against about 10 minutes with the air-time terms (docs/results/locomotion.md);
    - other feet: feet_air_time (2.0, a 0.25 s threshold: long steps pay);
    and feet_slip (-0.1) for both: sliding feet cost, at a stand-still command too."""
    r = REWARDS
    trots = _trots(robot)
    observations = (*DEFAULT_TERMS[robot.control_mode], *(("gait_phase",) if trots else ()))
    steps = (
        {"gait_phase_contact": RewardTerm(r["gait_phase_contact"], 2.0)}
        if trots
        else {"feet_air_time": RewardTerm(r["feet_air_time"], 2.0, {"threshold": 0.25})}
    )
    gait = {**steps, "feet_slip": RewardTerm(r["feet_slip"], -0.1)} if robot.feet else {}
    return VelocityTaskConfig(
        observations={name: ObservationTerm(OBSERVATIONS[name]) for name in observations},
        rewards={
            "tracking_lin_vel": RewardTerm(r["tracking_lin_vel"], 1.0, {"sigma": 0.25}),
            "tracking_ang_vel": RewardTerm(r["tracking_ang_vel"], 0.5, {"sigma": 0.25}),
            "lin_vel_z": RewardTerm(r["lin_vel_z"], -2.0),
            "ang_vel_xy": RewardTerm(r["ang_vel_xy"], -0.05),
            "orientation": RewardTerm(r["orientation"], -1.0),
            "torques": RewardTerm(r["torques"], -1e-5),
            "joint_acc": RewardTerm(r["joint_acc"], -2.5e-7),
            "action_rate": RewardTerm(r["action_rate"], -0.01),
            "termination": RewardTerm(r["termination"], -5.0),  # -5 * control_dt per fall
            **gait,
        },
        only_positive_rewards=bool(robot.feet),
        terminations={
            "base_too_low": TerminationTerm(TERMINATIONS["base_too_low"], {"min_base_height": 0.1}),
            "tilted": TerminationTerm(TERMINATIONS["tilted"], {"max_tilt_rad": 1.0}),
        },
    )


def _trots(robot: RobotSpec) -> bool:
    """Whether `robot` has four feet in two diagonal pairs: the default task trots it on the gait clock."""
    try:
        diagonal_pairs(robot)
    except SimError:
        return False
    return True


def check_task(cfg: VelocityTaskConfig, robot: RobotSpec, source: str) -> VelocityTaskConfig:
    """`cfg` when it gives a working task for `robot`; otherwise a SimError that names `source` and the field."""
    for name, term in cfg.observations.items():
        try:
            obs_term(name, robot.num_actions)
        except ValueError as e:
            raise SimError(f"{source}: observations: {e}") from None
        _check_params(term.func, term.params, f"{source}: observations.{name}")
    for name, term in cfg.rewards.items():
        if not math.isfinite(term.weight):
            raise SimError(f"{source}: rewards.{name}.weight must be finite, got {term.weight}")
        _check_params(term.func, term.params, f"{source}: rewards.{name}")
        _check_joint_lists(term.params, robot, f"{source}: rewards.{name}")
    if cfg.foot_terms and not robot.feet:
        raise SimError(
            f"{source}: rewards {', '.join(cfg.foot_terms)} need feet, and robot {robot.name!r} names none "
            "(robot YAML `feet:`, the foot geoms)"
        )
    for name, term in cfg.rewards.items():
        if term.func in CLOCK_TERMS and term.weight != 0.0:
            try:
                diagonal_pairs(robot)
            except SimError as e:
                raise SimError(f"{source}: rewards.{name}: {e}") from None
    for name, term in cfg.terminations.items():
        _check_params(term.func, term.params, f"{source}: terminations.{name}")
    c = cfg.commands
    if not c.resample_s > 0 or not 0.0 <= c.stand_still_share <= 1.0:
        raise SimError(f"{source}: commands.resample_s must be > 0 and commands.stand_still_share in [0, 1]")
    if (why := duty_error(c.duty, c.duty_share)) is not None:
        raise SimError(f"{source}: commands.{why}")
    if c.ranges is not None:
        for axis in ("vx", "vy", "wz"):
            (lo, hi), (lim_lo, lim_hi) = getattr(c.ranges, axis), getattr(robot.command_limits, axis)
            if lo < lim_lo or hi > lim_hi:
                raise SimError(
                    f"{source}: commands.ranges.{axis} [{lo}, {hi}] is outside robot {robot.name!r}'s "
                    f"command_limits.{axis} [{lim_lo}, {lim_hi}]"
                )
    if not cfg.episode_length_s > 0:
        raise SimError(f"{source}: episode_length_s must be > 0, got {cfg.episode_length_s}")
    if min(dataclasses.astuple(cfg.reset)) < 0:
        raise SimError(f"{source}: reset noise widths must be non-negative, got {cfg.reset}")
    return cfg


def duty_error(duty: Sequence[Sequence[float]], share: float) -> str | None:
    """Why a duty table (rows of vx, vy, wz, weight) and the share of the draws taken from it are refused; None
    where they are not."""
    if not 0.0 <= share <= 1.0:
        return f"duty_share must be in [0, 1], got {share}"
    if share and not duty:
        return "duty_share needs duty: the commands to draw from"
    if any(len(row) != 4 or row[3] < 0 for row in duty) or (duty and not sum(row[3] for row in duty) > 0):
        return "duty: each row is [vx, vy, wz, weight >= 0], and the weights may not all be 0"
    return None


def _check_joint_lists(params: dict, robot: RobotSpec, where: str) -> None:
    # a list parameter holds one value per joint (pose's joint_weights)
    for key, value in params.items():
        if isinstance(value, tuple) and len(value) != robot.num_actions:
            raise SimError(
                f"{where}.params.{key}: {len(value)} values for robot {robot.name!r}'s {robot.num_actions} joints"
            )


def _check_params(func: TermFunc, params: dict, where: str) -> None:
    if not callable(func):
        raise SimError(f"{where}: func must be callable, got {func!r}")
    accepted = list(inspect.signature(func).parameters.values())[1:]  # the first is the TermContext
    if any(p.kind is p.VAR_KEYWORD for p in accepted):
        return
    names = [p.name for p in accepted]
    problems = []
    unknown = sorted(set(params) - set(names))
    if unknown:
        problems.append(f"unknown {', '.join(unknown)}")
    missing = [p.name for p in accepted if p.default is p.empty and p.name not in params]
    if missing:
        problems.append(f"missing {', '.join(missing)}")
    if problems:
        raise SimError(f"{where}.params: {'; '.join(problems)} ({func.__name__} takes: {', '.join(names) or 'none'})")
