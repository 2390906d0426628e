"""Scoring a run: tracking KPIs with `sim.kpis` (the campaigns' code), and where the robot went.

A run is recorded as rows (t, cmd_vx, cmd_vy, cmd_wz, vx, vy, wz, z, x, y, yaw), one per control step: the command
in force, the base-frame velocities and the base pose.
"""

from __future__ import annotations

import math

import numpy as np

from sim.kpis import count_events, settled, tracking_errors

SETTLE_S = 1.0  # after a command change, errors are not counted for this long (as in campaigns: sim.kpis)


def tracking_kpis(samples: np.ndarray, dt: float, min_base_height: float) -> dict:
    """Tracking errors and falls of rows (t, cmd_vx, cmd_vy, cmd_wz, vx, vy, wz, z, ...), scored as campaigns are."""
    commands, lin, ang = samples[:, 1:4], np.zeros((len(samples), 3)), np.zeros((len(samples), 3))
    lin[:, :2], ang[:, 2] = samples[:, 4:6], samples[:, 6]
    err_lin, err_ang = tracking_errors(commands, lin, ang, settled(commands, dt, SETTLE_S))
    return {
        "samples": int(len(samples)),
        "tracking_error_lin": float(err_lin),
        "tracking_error_ang": float(err_ang),
        "falls": int(count_events(samples[:, 7] < min_base_height)),
    }


def displacement(samples: np.ndarray) -> dict:
    """Where the robot went, in its start frame: rows (..., x, y, yaw) in the last three columns."""
    x, y, yaw = samples[:, -3], samples[:, -2], np.unwrap(samples[:, -1])
    c, s = math.cos(yaw[0]), math.sin(yaw[0])
    dx, dy = x[-1] - x[0], y[-1] - y[0]
    return {"forward_m": float(c * dx + s * dy), "left_m": float(-s * dx + c * dy), "yaw_rad": float(yaw[-1] - yaw[0])}
