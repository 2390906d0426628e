"""System identification recovers planted twin parameters from a log of the 'field' robot."""

import numpy as np
import pytest

from sim.controllers import DiffDriveController
from sim.randomization import RandomizationConfig, fixed_params
from sim.robot import load_robot
from sim.twin import BatchedTwin
from training.retrain.sysid import SysIdConfig, Window, identify, replay_errors

PLANTED = {"payload_kg": 3.0, "latency_s": 0.02}  # the field robot: heavier and laggier than the nominal twin
SCRIPT = [(1.0, 0.8, 0.0), (1.0, 0.0, 1.2), (1.0, -0.5, 0.0), (1.0, 0.4, -1.0)]


@pytest.fixture(scope="module")
def field_log():
    """Joint targets and base velocities of the planted robot driven by the hand-written controller."""
    spec = load_robot("rover")
    twin = BatchedTwin(spec, num_envs=1, randomization=RandomizationConfig(enabled=False), resample_commands=False)
    twin.reset()
    s = twin.backend.state()
    twin.backend.set_state(np.array([0]), s["base_pos"] * [0, 0, 1], np.array([[1.0, 0, 0, 0]]), np.zeros((1, 3)),
                           np.zeros((1, 3)), np.zeros((1, 2)), np.zeros((1, 2)))
    twin.set_params(fixed_params(PLANTED, spec.sim_dt))
    controller = DiffDriveController(twin)
    targets, lin, ang = [], [], []
    for seconds, vx, wz in SCRIPT:
        twin.set_commands(np.array([vx, 0.0, wz]))
        for _ in range(int(round(seconds / spec.control_dt))):
            action = controller()
            twin.step(action)
            targets.append(spec.action_scale * action[0])
            v, w = twin.task.base_velocities(twin.backend.state())
            lin.append(v[0])
            ang.append(w[0])
    return spec, Window.from_rest(spec, np.array(targets), np.array(lin), np.array(ang))


def test_replay_with_the_true_parameters_reproduces_the_log(field_log):
    spec, window = field_log
    true_error, nominal_error = replay_errors(spec, [window], [PLANTED, {}])
    assert true_error < 1e-12 < nominal_error


def test_identification_recovers_planted_parameters(field_log):
    spec, window = field_log
    result = identify(spec, [window], SysIdConfig(params=("payload_kg", "latency_s"), population=12,
                                                             generations=20))
    assert result.values["payload_kg"] == pytest.approx(3.0, abs=0.5)
    assert result.values["latency_s"] == pytest.approx(0.02, abs=spec.sim_dt + 1e-9)
    assert result.error_after < 0.3 * result.error_before


def test_unknown_parameter_and_missing_commands_are_named(field_log):
    spec, window = field_log
    with pytest.raises(ValueError, match="cannot identify gravity"):
        SysIdConfig(params=("gravity",))
    with pytest.raises(ValueError, match="joint_commands"):
        identify(spec, [Window.from_rest(spec, np.full_like(window.targets, np.nan), window.lin_vel, window.ang_vel)])
    with pytest.raises(ValueError, match="joint_commands"):
        identify(spec, [])
