"""The duty a fine-tuning rehearses (training.retrain.duty): the logged commands as a table of distinct commands and
their shares of the logged time."""

from pathlib import Path

import numpy as np
import pytest

from training.retrain.duty import duty_table
from training.retrain.ingest import FieldLog


def log(commands: np.ndarray, missing: dict | None = None) -> FieldLog:
    t = np.arange(len(commands)) * 0.02
    zeros, joints = np.zeros((len(t), 3)), np.zeros((len(t), 2))
    return FieldLog(
        Path("duty.mcap"), t, commands, zeros, zeros, zeros, np.full(len(t), np.nan), joints, joints, joints,
        missing=missing or {},
    )  # fmt: skip


def steps(*segments: tuple[float, list[float]]) -> np.ndarray:
    return np.concatenate([np.tile(cmd, (int(round(seconds / 0.02)), 1)) for seconds, cmd in segments])


def test_each_command_is_weighed_by_its_logged_time_over_all_logs():
    a = log(steps((3.0, [0.5, 0.0, 0.0]), (1.0, [0.0, 0.0, 0.8])))
    b = log(steps((1.0, [0.0, 0.0, 0.8]), (1.0, [0.0, 0.0, 0.0])))
    assert duty_table([a, b]) == [[0.5, 0.0, 0.0, 0.5], [0.0, 0.0, 0.8, 0.333333], [0.0, 0.0, 0.0, 0.166667]]


def test_a_chirp_is_rounded_to_the_resolution_and_the_table_keeps_the_most_frequent_rows():
    t = np.arange(0.0, 20.0, 0.02)
    chirp = np.column_stack([np.zeros_like(t), np.zeros_like(t), 0.6 * np.sin(2 * np.pi * 0.2 * t)])
    held = steps((10.0, [0.3, 0.0, 0.0]))
    table = duty_table([log(np.concatenate([chirp, held]))], resolution=0.05, max_rows=8)
    assert len(table) == 8 and table[0][:3] == [0.3, 0.0, 0.0]
    assert all(abs(v / 0.05 - round(v / 0.05)) < 1e-6 for row in table for v in row[:3])
    assert sum(row[3] for row in table) == pytest.approx(1.0)


def test_logs_without_commands_give_no_duty():
    silent = log(np.zeros((100, 3)), missing={"commands": "no velocity commands logged: no /cmd_vel"})
    assert duty_table([silent]) == [] and duty_table([]) == []
