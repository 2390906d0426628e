"""sim.kpis on hand-made trajectories whose KPIs are known in closed form."""

import numpy as np
import pytest

from sim.kpis import (
    GAIT_KPIS,
    KPI_NAMES,
    RobotLimits,
    Trajectory,
    before_first,
    count_events,
    episode_kpis,
    fall_flags,
    settled,
)

T, N, DT = 10, 2, 0.1
LIMITS = RobotLimits(np.array([-1.0, -np.inf]), np.array([1.0, np.inf]), np.array([10.0, 5.0]), 1.0, 0.2)


def _traj(**overrides) -> Trajectory:
    level = np.tile([0.0, 0.0, -1.0], (T, 1))
    fields = {
        "dt": DT,
        "commands": np.tile([1.0, 0.0, 0.5], (T, 1)),
        "base_lin_vel": np.tile([0.8, 0.0, 0.0], (T, 1)),
        "base_ang_vel": np.tile([0.0, 0.0, 0.3], (T, 1)),
        "projected_gravity": level,
        "joint_pos": np.zeros((T, N)),
        "joint_vel": np.ones((T, N)),
        "torques": np.tile([2.0, -3.0], (T, 1)),
        "actions_raw": np.zeros((T, N)),
        "actions": np.zeros((T, N)),
        "base_height": np.full(T, 0.3),
    }
    fields.update(overrides)
    return Trajectory(**fields)


def test_known_values_of_a_steady_episode():
    k = episode_kpis(_traj(), LIMITS, settle_s=0.0)
    assert set(k) == set(KPI_NAMES) - set(GAIT_KPIS)  # no feet: no gait KPIs
    assert k["tracking_error_lin"] == pytest.approx(0.2)
    assert k["tracking_error_ang"] == pytest.approx(0.2)
    assert k["falls"] == 0 and k["joint_limit_violations"] == 0 and k["safety_interventions"] == 0
    assert k["peak_torque"] == pytest.approx(3.0)
    assert k["peak_torque_ratio"] == pytest.approx(0.6)  # 3 / 5 on the second joint
    assert k["energy_j"] == pytest.approx((2 + 3) * T * DT)


def test_a_fall_ends_scoring_and_counts_once():
    gravity = np.tile([0.0, 0.0, -1.0], (T, 1))
    gravity[6:] = [1.0, 0.0, 0.0]  # on its side from step 6 on
    vel = np.tile([0.8, 0.0, 0.0], (T, 1))
    vel[6:] = 5.0  # tumbling: must not enter the tracking error
    k = episode_kpis(_traj(projected_gravity=gravity, base_lin_vel=vel), LIMITS, settle_s=0.0)
    assert k["falls"] == 1
    assert k["tracking_error_lin"] == pytest.approx(0.2)
    assert k["energy_j"] == pytest.approx(5 * 6 * DT)


def test_external_fall_flags_and_base_height():
    low = np.full(T, 0.3)
    low[3] = 0.1
    assert episode_kpis(_traj(base_height=low), LIMITS)["falls"] == 1
    fell = np.zeros(T, bool)
    fell[8:] = True
    assert episode_kpis(_traj(fell=fell), LIMITS)["falls"] == 1
    assert fall_flags(np.tile([0.0, 0.0, -1.0], (T, 1)), 1.0, None, 0.2).sum() == 0  # a field log: no height


def test_settle_window_skips_the_response_to_each_command_change():
    cmd = np.zeros((T, 3))
    cmd[5:, 0] = 1.0
    mask = settled(cmd, DT, 0.2)
    assert mask.tolist() == [False, False, True, True, True, False, False, True, True, True]


def test_joint_limits_interventions_and_events():
    q = np.zeros((T, N))
    q[2:4, 0] = 1.5  # two steps beyond the first joint's range; the second joint has none
    q[:, 1] = 100.0
    raw = np.zeros((T, N))
    raw[1, 0] = 20.0  # clamped by the filter
    raw[4, 1] = np.nan  # replaced with the safe action
    k = episode_kpis(_traj(joint_pos=q, actions_raw=raw), LIMITS)
    assert k["joint_limit_violations"] == 2
    assert k["safety_interventions"] == 2
    assert count_events(np.array([0, 1, 1, 0, 1, 0], bool)) == 2
    assert before_first(np.array([0, 0, 1, 0], bool)).tolist() == [True, True, False, False]


def test_batches_of_episodes_and_missing_fields():
    def stack(x):
        return np.stack([x, x, x])

    base = _traj()
    batch = Trajectory(
        DT,
        *(
            stack(getattr(base, f))
            for f in ("commands", "base_lin_vel", "base_ang_vel", "projected_gravity", "joint_pos", "joint_vel")
        ),
    )
    k = episode_kpis(batch, LIMITS, settle_s=0.0)
    assert k["tracking_error_lin"].shape == (3,)
    assert "energy_j" not in k and "safety_interventions" not in k  # no torques / actions in this log
