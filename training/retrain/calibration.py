"""The IMU's gyro bias, identified from field logs against the odometry.

A gyro adds a constant bias to every angular-velocity reading. No twin parameter expresses it, so system
identification cannot fit it, and in a short replay window it barely shows. But the odometry measures the same
rotation through other sensors (the wheels, the legs' kinematics): on each axis, a least-squares line
imu = bias + scale * odom over the whole log gives the bias as its intercept, and the scale takes up an odometry
that reads rotation short (wheels that slip). Where the odometry is planar (roll and pitch rates 0), the line is
the mean: the base does not keep rolling or pitching, so their true rates average out over a log.

The 95% interval counts each `block_s` of log as one observation, from the block-clustered covariance of the
line: the residuals within a second are not independent (the base sways, an estimator lags the gyro). An axis is
determined when its half-width is within `tolerance`. The odometry must not be built on this IMU (a legged
robot's state estimator often is): where the two are equal, the bias is not determined.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from edge.config import setting
from training.retrain.estimate import Estimate
from training.retrain.ingest import FieldLog

__all__ = ["AXES", "CalibrationConfig", "GyroBias", "gyro_bias"]

AXES = ("gyro_bias_x", "gyro_bias_y", "gyro_bias_z")


@dataclass(frozen=True)
class CalibrationConfig:
    tolerance: float = setting(0.005, "a 95% half-width above this is not determined (rad/s)", gt=0)
    block_s: float = setting(1.0, "log seconds counted as one observation in the interval", gt=0)
    min_blocks: int = setting(5, "blocks of IMU beside odometry needed for an interval", ge=3)
    # a scale this far from 1 means the two do not measure the same rotation: other axes, frames or units
    scale_range: tuple[float, float] = setting((0.5, 2.0), "odometry-to-IMU scales taken as the same rotation")


@dataclass(frozen=True)
class GyroBias:
    """The bias per gyro axis (AXES), or why the logs cannot tell it (`why_not`, with `axes` empty)."""

    axes: dict[str, Estimate] = field(default_factory=dict)
    why_not: str = ""

    @property
    def offset(self) -> np.ndarray:
        """(3,) rad/s: the determined axes' biases, 0 on the others (nothing is removed that is not known)."""
        return np.array([e.value if (e := self.axes.get(a)) and e.determined else 0.0 for a in AXES])

    def remove(self, log: FieldLog) -> FieldLog:
        """The log with the determined biases taken off its IMU angular velocity (an odometry-only log: as is)."""
        if log.odom_ang_vel is None or not self.offset.any():
            return log
        return dataclasses.replace(log, base_ang_vel=log.base_ang_vel - self.offset)

    def show(self) -> str:
        """One line: each axis with its interval, or why the logs cannot tell it."""
        if not self.axes:
            return f"not measured: {self.why_not}"
        whys = {e.why for e in self.axes.values()}
        if len(whys) == 1 and "" not in whys:  # no axis determined, for one reason
            return f"not determined: {whys.pop()}"
        parts = []
        for name, e in self.axes.items():
            text = f"{name[-1]} {e.value:.4f} ({e.low:.4f} to {e.high:.4f})"
            parts.append(text if e.determined else f"{text}, not determined: {e.why}")
        return "; ".join(parts) + " rad/s"

    def ros_params(self) -> str:
        """policy_node's parameter file that takes the determined biases off its IMU (ros2 launch ...
        params_file:=, or merged into the robot's own): YAML text."""
        bias = ", ".join(f"{b:.6g}" for b in self.offset)
        return (
            "# The IMU's gyro bias that `sim2real retrain` identified against the odometry (0 on an axis the\n"
            "# logs do not determine): policy_node takes it off every /imu/data reading. Merge it into the\n"
            "# robot's params file.\n"
            f"/**/policy_node:\n  ros__parameters:\n    gyro_bias: [{bias}]\n"
        )

    def to_dict(self) -> dict:
        return {"axes": {k: e.to_dict() for k, e in self.axes.items()}, "why_not": self.why_not}

    @classmethod
    def from_dict(cls, d: dict | None) -> GyroBias:
        if not d:
            return cls(why_not="not calibrated")
        return cls({k: Estimate.from_dict(e) for k, e in d["axes"].items()}, d.get("why_not", ""))


def gyro_bias(logs: list[FieldLog], cfg: CalibrationConfig | None = None) -> GyroBias:
    """Each gyro axis's bias against the odometry, over every log that has both (FieldLog.odom_ang_vel)."""
    cfg = cfg or CalibrationConfig()
    both = [log for log in logs if log.odom_ang_vel is not None and len(log.t) > 1]
    if not both:
        return GyroBias(why_not="no log has both an IMU and an odometry to compare it with")
    imu, odom, block = [], [], []
    for log in both:
        rows = np.isfinite(log.base_ang_vel).all(1) & np.isfinite(log.odom_ang_vel).all(1)
        imu.append(log.base_ang_vel[rows])
        odom.append(log.odom_ang_vel[rows])
        block.append(len(block) * 10**9 + (log.t[rows] // cfg.block_s).astype(np.int64))  # blocks never span logs
    imu, odom = np.concatenate(imu), np.concatenate(odom)
    _, cluster = np.unique(np.concatenate(block), return_inverse=True)
    blocks = int(cluster.max()) + 1 if len(cluster) else 0
    if blocks < cfg.min_blocks:
        seconds = blocks * cfg.block_s
        return GyroBias(why_not=f"{seconds:g} s of IMU beside odometry; the interval needs {cfg.min_blocks} blocks")
    return GyroBias({name: _axis(imu[:, i], odom[:, i], cluster, blocks, cfg) for i, name in enumerate(AXES)})


def _axis(imu: np.ndarray, odom: np.ndarray, cluster: np.ndarray, blocks: int, cfg: CalibrationConfig) -> Estimate:
    """The intercept of imu = bias + scale * odom (the mean where the odometry is flat), its block-clustered 95%
    interval, and whether it is determined."""
    from scipy.stats import t

    if np.allclose(imu, odom, rtol=0, atol=1e-9) and np.ptp(odom) > 0:
        return Estimate(0.0, -np.inf, np.inf, False, "the odometry's angular velocity is this IMU's own")
    x = np.column_stack([np.ones_like(odom), odom]) if np.ptp(odom) > 0 else np.ones((len(odom), 1))
    coef, *_ = np.linalg.lstsq(x, imu, rcond=None)
    scores = np.zeros((blocks, x.shape[1]))
    np.add.at(scores, cluster, x * (imu - x @ coef)[:, None])
    bread = np.linalg.pinv(x.T @ x)
    dof = max(blocks - x.shape[1], 1)
    cov = bread @ (scores.T @ scores) @ bread * blocks / dof
    bias, half = float(coef[0]), float(np.sqrt(max(cov[0, 0], 0.0)) * t.ppf(0.975, dof))
    low, high = bias - half, bias + half
    if x.shape[1] == 2 and not cfg.scale_range[0] <= coef[1] <= cfg.scale_range[1]:
        return Estimate(bias, low, high, False, f"the odometry and the IMU disagree on rotation (scale {coef[1]:.3g})")
    if half > cfg.tolerance:
        return Estimate(bias, low, high, False, f"its 95% interval is wider than +/-{cfg.tolerance:g} rad/s")
    return Estimate(bias, low, high, True)
