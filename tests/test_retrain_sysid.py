"""System identification recovers planted twin parameters from a log of the 'field' robot."""

import dataclasses

import numpy as np
import pytest

from edge.observation import projected_gravity
from sim.controllers import DiffDriveController
from sim.randomization import RandomizationConfig, fixed_params
from sim.robot import load_robot
from sim.twin import BatchedTwin
from training.retrain.ingest import FieldLog
from training.retrain.sysid import SysIdConfig, identify, log_windows, replay_errors

PLANTED = {"payload_kg": 3.0, "latency_s": 0.02}  # the field robot: heavier and laggier than the nominal twin
SCRIPT = [(1.0, 0.8, 0.0), (1.0, 0.0, 1.2), (1.0, -0.5, 0.0), (1.0, 0.4, -1.0)]


@pytest.fixture(scope="module")
def field_log():
    """What the field robot (the planted parameters) logs while the hand-written controller drives it: the state
    it starts from and passes through, joint targets and base velocities, as read from an MCAP log."""
    spec = load_robot("rover")
    twin = BatchedTwin(
        spec, num_envs=1, seed=3, randomization=RandomizationConfig(enabled=False), resample_commands=False
    )
    twin.reset()  # a random yaw and small random velocities
    twin.set_params(fixed_params(PLANTED, spec.sim_dt))
    controller = DiffDriveController(twin)
    rows = []
    for seconds, vx, wz in SCRIPT:
        twin.set_commands(np.array([vx, 0.0, wz]))
        for _ in range(int(round(seconds / spec.control_dt))):
            action = controller()
            twin.step(action)
            s = twin.backend.state()
            lin, ang = twin.task.base_velocities(s)
            rows.append(
                (
                    twin.commands[0].copy(),
                    lin[0],
                    ang[0],
                    projected_gravity(s["base_quat"])[0],
                    s["base_pos"][0, 2],
                    s["joint_pos"][0],
                    s["joint_vel"][0],
                    spec.action_scale * action[0],
                    s["base_quat"][0],
                )
            )
    cmd, lin, ang, grav, z, jp, jv, targets, quat = (np.array(c) for c in zip(*rows, strict=True))
    log = FieldLog(None, np.arange(len(rows)) * spec.control_dt, cmd, lin, ang, grav, z, jp, jv, targets, [], quat)
    return spec, log, log_windows([log], 0.1, 12)


def test_replay_with_the_true_parameters_reproduces_the_log(field_log):
    spec, log, windows = field_log
    assert len(windows) == 12 and all(len(w.targets) == 5 for w in windows)
    # the command changes come first (the robot accelerates there), from the state just before the change
    changes = np.flatnonzero(np.any(np.diff(log.commands, axis=0) != 0, axis=1))
    assert [np.flatnonzero((log.base_lin_vel == w.start_lin_vel).all(1))[0] for w in windows[:3]] == [
        int(c) - 1 for c in changes
    ]
    true_error, nominal_error = replay_errors(spec, windows, [PLANTED, {}])
    assert true_error < 1e-12 < nominal_error


def test_identification_recovers_planted_parameters(field_log):
    spec, _, windows = field_log
    result = identify(spec, windows, SysIdConfig(params=("payload_kg", "latency_s"), population=8, generations=12))
    assert result.values["payload_kg"] == pytest.approx(PLANTED["payload_kg"], rel=0.1)
    assert result.values["latency_s"] == pytest.approx(PLANTED["latency_s"], abs=1e-9)
    assert result.error_after < 0.3 * result.error_before


def test_unknown_parameter_and_missing_commands_are_named(field_log):
    spec, _, windows = field_log
    with pytest.raises(ValueError, match="cannot identify gravity"):
        SysIdConfig(params=("gravity",))
    with pytest.raises(ValueError, match="joint_commands"):
        identify(spec, [dataclasses.replace(windows[0], targets=np.full_like(windows[0].targets, np.nan))])
    with pytest.raises(ValueError, match="joint_commands"):
        identify(spec, [])
