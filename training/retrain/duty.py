"""The commands a robot was given in the field, as a table: each distinct command (rounded to a resolution) with its
share of the logged time. A fine-tuning draws part of its commands from it (PPOConfig.duty_share), so the policy
rehearses the duty it is retrained for, not only the task's uniform ranges."""

from __future__ import annotations

import numpy as np

from training.retrain.ingest import FieldLog

__all__ = ["duty_table"]


def duty_table(logs: list[FieldLog], resolution: float = 0.05, max_rows: int = 64) -> list[list[float]]:
    """Rows [vx, vy, wz, share of the logged time] of the commands the logs hold, the most frequent `max_rows`
    (a chirp's sweep is many commands; rounding to `resolution` keeps the table short); [] where no log holds
    commands."""
    commands = [log.commands for log in logs if "commands" not in log.missing and len(log.commands)]
    if not commands:
        return []
    rounded = np.round(np.concatenate(commands) / resolution) * resolution
    rows, counts = np.unique(rounded, axis=0, return_counts=True)
    keep = np.argsort(-counts, kind="stable")[:max_rows]
    shares = counts[keep] / counts[keep].sum()
    return [[*map(float, np.round(rows[i], 6)), round(float(s), 6)] for i, s in zip(keep, shares, strict=True)]
