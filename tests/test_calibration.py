"""The IMU's gyro bias identified against the odometry: recovered inside its interval, left undetermined where the
logs cannot tell it, taken off the yaw rate the KPIs score, and written as policy_node's calibration."""

from pathlib import Path

import numpy as np
import pytest
import yaml

from sim.robot import load_robot
from tests.field_logs import write_log
from training.retrain.calibration import AXES, CalibrationConfig, GyroBias, gyro_bias
from training.retrain.drift import ingest_logs
from training.retrain.ingest import FieldLog

SCRIPT = [(4.0, 0.5, 0.0, 0.0), (4.0, 0.0, 0.0, 0.8), (4.0, 0.3, 0.0, -0.5), (4.0, -0.3, 0.0, 0.0)]


def turning_log(bias=(0.0, 0.0, 0.0), odom_scale=1.0, seconds=40.0, seed=0, odom_equals_imu=False) -> FieldLog:
    """50 Hz of a base turning at a varying rate and swaying in roll and pitch (rates that average out); the IMU
    reads the truth plus `bias` and 0.01 rad/s noise, a planar odometry reads (0, 0, odom_scale * yaw rate) plus
    its own noise."""
    rng = np.random.default_rng(seed)
    t = np.arange(0.0, seconds, 0.02)
    sway = [0.05 * np.sin(2 * np.pi * 1.5 * t), 0.04 * np.cos(2 * np.pi * 1.1 * t)]
    true = np.column_stack([*sway, np.sin(0.4 * t)])
    imu = true + np.asarray(bias) + rng.normal(0, 0.01, true.shape)
    odom = np.zeros_like(true)
    odom[:, 2] = odom_scale * true[:, 2] + rng.normal(0, 0.01, len(t))
    if odom_equals_imu:
        odom = imu.copy()
    zeros = np.zeros((len(t), 3))
    joints = np.zeros((len(t), 2))
    return FieldLog(
        Path("synthetic.mcap"), t, zeros, zeros, imu, zeros, np.full(len(t), np.nan), joints, joints, joints,
        odom_ang_vel=odom,
    )  # fmt: skip


def test_a_yaw_bias_is_recovered_inside_its_interval_despite_odometry_that_reads_short():
    bias = gyro_bias([turning_log(bias=(0.004, -0.003, 0.02), odom_scale=0.95)])
    assert not bias.why_not and list(bias.axes) == list(AXES)
    for name, true in zip(AXES, (0.004, -0.003, 0.02), strict=True):
        e = bias.axes[name]
        assert e.determined and e.low <= true <= e.high, (name, e)
        assert abs(e.value - true) < 0.002 and e.high - e.low < 0.01
    np.testing.assert_allclose(bias.offset, [e.value for e in bias.axes.values()])


def test_an_odometry_built_on_the_imu_determines_nothing():
    bias = gyro_bias([turning_log(bias=(0, 0, 0.02), odom_equals_imu=True)])
    z = bias.axes["gyro_bias_z"]
    assert not z.determined and z.why == "the odometry's angular velocity is this IMU's own"
    assert bias.offset[2] == 0.0  # nothing is removed that is not known


def test_an_odometry_that_disagrees_on_rotation_determines_nothing():
    z = gyro_bias([turning_log(bias=(0, 0, 0.02), odom_scale=-1.0)]).axes["gyro_bias_z"]  # a flipped axis
    assert not z.determined and "disagree on rotation (scale -1" in z.why


def test_a_wide_interval_is_not_determined():
    cfg = CalibrationConfig(tolerance=1e-5)
    z = gyro_bias([turning_log(bias=(0, 0, 0.02))], cfg).axes["gyro_bias_z"]
    assert not z.determined and "wider than +/-1e-05 rad/s" in z.why and z.low < 0.02 < z.high


def test_logs_that_cannot_tell_say_why():
    no_odometry = gyro_bias([FieldLog(Path("imu_only.mcap"), *_empty(100))])
    assert not no_odometry.axes and "no log has both an IMU and an odometry" in no_odometry.why_not
    assert no_odometry.show().startswith("not measured: ")
    short = gyro_bias([turning_log(seconds=3.0)])
    assert not short.axes and short.why_not == "3 s of IMU beside odometry; the interval needs 5 blocks"


def test_remove_takes_the_determined_bias_off_the_imu_only():
    log = turning_log(bias=(0, 0, 0.02))
    bias = gyro_bias([log])
    corrected = bias.remove(log)
    np.testing.assert_allclose(corrected.base_ang_vel, log.base_ang_vel - bias.offset)
    assert corrected.odom_ang_vel is log.odom_ang_vel
    odometry_only = FieldLog(Path("odom.mcap"), *_empty(100))  # its yaw rate is the odometry's: nothing to take off
    assert bias.remove(odometry_only) is odometry_only


def test_the_record_round_trips_and_becomes_policy_node_parameters():
    bias = gyro_bias([turning_log(bias=(0, 0, 0.02))])
    again = GyroBias.from_dict(bias.to_dict())
    assert again == bias and "z 0.02" in again.show()
    params = yaml.safe_load(bias.ros_params())["/**/policy_node"]["ros__parameters"]
    np.testing.assert_allclose(params["gyro_bias"], bias.offset, atol=1e-6)
    assert GyroBias.from_dict(None).show() == "not measured: not calibrated"


def test_ingest_scores_the_yaw_rate_less_the_bias(tmp_path):
    """A field log whose IMU reads 0.05 rad/s too much: ingest identifies the bias, and its yaw-rate KPI is the
    unbiased log's, not 0.05 worse."""
    spec = load_robot("rover")
    true = ingest_logs([write_log(tmp_path / "true.mcap", SCRIPT, lag=0.1)], spec)
    biased = ingest_logs([write_log(tmp_path / "biased.mcap", SCRIPT, lag=0.1, gyro_bias=0.05)], spec)
    z = GyroBias.from_dict(biased["gyro_bias"]).axes["gyro_bias_z"]
    assert z.determined and z.value == pytest.approx(0.05, abs=1e-9)
    assert not GyroBias.from_dict(true["gyro_bias"]).axes["gyro_bias_z"].determined  # its IMU is its odometry
    assert biased["field_kpis"]["tracking_error_ang"] == pytest.approx(true["field_kpis"]["tracking_error_ang"])


def _empty(steps: int) -> tuple:
    """FieldLog's arrays for `steps` control steps of a standing robot (no odometry beside its IMU)."""
    zeros, joints = np.zeros((steps, 3)), np.zeros((steps, 2))
    return np.arange(steps) * 0.02, zeros, zeros, zeros, zeros, np.full(steps, np.nan), joints, joints, joints
