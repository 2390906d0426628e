"""The parts of `sim2real.sil` below the closed loop (tests/test_sil_closed_loop.py): the operator's scripts, the
displacement, and the node processes' early-exit report (a real node process that fails at start-up)."""

import math
import time

import numpy as np
import pytest
import yaml

from sim2real.errors import UserError
from sim2real.sil import DEFAULT_COMMANDS, command_at, displacement, load_commands, load_instructions
from sim2real.sil.processes import NodeProcesses
from tests.ros_helpers import ros_env


def write(tmp_path, data, name="script.yaml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data))
    return path


def test_the_default_command_script_loads():
    assert len(load_commands(DEFAULT_COMMANDS)) >= 2


def test_the_identification_manoeuvre_stays_inside_the_rovers_command_limits():
    from edge.resources import config_path
    from sim.robot import load_robot

    segments = load_commands(config_path("sil") / "identification_commands.yaml")
    assert any(s.chirp for s in segments)
    limits = load_robot("rover").command_limits
    commands = np.array([command_at(segments, t) for t in np.arange(0, sum(s.duration_s for s in segments), 0.02)])
    for axis, column in (("vx", 0), ("wz", 2)):
        low, high = getattr(limits, axis)
        assert low <= commands[:, column].min() and commands[:, column].max() <= high, axis


def test_a_chirp_sweeps_its_frequency_over_the_segment(tmp_path):
    chirp = {"vx": 0.2, "chirp": "wz", "amplitude": 1.0, "from_hz": 1.0, "to_hz": 3.0, "duration_s": 2.0}
    segments = load_commands(write(tmp_path, [chirp]))
    t = np.arange(0, 2.0, 1e-3)
    wz = np.array([command_at(segments, x)[2] for x in t])
    assert np.all(np.array([command_at(segments, x)[0] for x in t[:10]]) == 0.2)  # the constant part stays
    crossings = t[1:][np.diff(np.sign(wz)) != 0]  # a sine crosses zero twice per period
    # its phase in periods is f0 t + (f1 - f0) t^2 / 2T: 1.5 in the first second, 2.5 in the second (1 Hz to 3 Hz)
    early, late = np.sum(crossings < 1.0), np.sum(crossings >= 1.0)
    assert (early, late) in ((3, 4), (3, 5)) and np.abs(wz).max() == pytest.approx(1.0, abs=1e-3)


def test_a_command_script_plays_its_segments_in_order_and_repeats(tmp_path):
    segments = load_commands(write(tmp_path, [{"vx": 0.5, "duration_s": 1.0}, {"wz": -1.0, "duration_s": 2.0}]))
    assert command_at(segments, 0.0).tolist() == [0.5, 0.0, 0.0]
    assert command_at(segments, 1.0).tolist() == [0.0, 0.0, -1.0]
    assert command_at(segments, 3.5).tolist() == [0.5, 0.0, 0.0]  # repeated from the start


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([], "expected a non-empty list"),
        ({"vx": 1.0}, "expected a non-empty list"),
        ([{"vx": 1.0}], "needs numeric vx, vy, wz and duration_s"),
        ([{"vx": "fast", "duration_s": 1.0}], "needs numeric vx, vy, wz and duration_s"),
        ([{"vx": 1.0, "duration_s": 0.0}], "durations must be positive"),
        ([{"chirp": "yaw", "amplitude": 1, "from_hz": 1, "to_hz": 2, "duration_s": 1}], "a chirp, an axis of vx"),
        ([{"chirp": "wz", "amplitude": 1, "from_hz": 2, "to_hz": 1, "duration_s": 1}], "0 < from_hz <= to_hz"),
        ([{"chirp": "wz", "from_hz": 1, "to_hz": 2, "duration_s": 1}], "numeric amplitude"),
    ],
)
def test_bad_command_scripts_are_a_user_error(tmp_path, data, message):
    with pytest.raises(UserError, match=message):
        load_commands(write(tmp_path, data))


def test_an_instruction_script_is_sent_in_time_order(tmp_path):
    script = load_instructions(write(tmp_path, [{"t_s": 5, "text": "turn left"}, {"t_s": 0, "text": "go"}]))
    assert [(i.t_s, i.text) for i in script] == [(0.0, "go"), (5.0, "turn left")]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (None, "does not exist"),
        ([], "expected a non-empty list"),
        ([{"text": "go"}], "needs a numeric t_s and a text"),
        ([{"t_s": -1.0, "text": "go"}], "finite and >= 0"),
        ([{"t_s": math.inf, "text": "go"}], "finite and >= 0"),
    ],
)
def test_bad_instruction_scripts_are_a_user_error(tmp_path, data, message):
    path = tmp_path / "missing.yaml" if data is None else write(tmp_path, data)
    with pytest.raises(UserError, match=message):
        load_instructions(path)


def test_displacement_is_in_the_start_frame():
    # facing +y (yaw 90 deg), 2 m along +y is 2 m forward; then 1 m along -x is 1 m to the left; yaw unwrapped
    rows = np.array([[0.0, 0.0, math.pi / 2], [0.0, 2.0, math.pi - 0.1], [-1.0, 2.0, -math.pi + 0.1]])
    moved = displacement(np.hstack([np.zeros((3, 8)), rows]))
    assert moved["forward_m"] == pytest.approx(2.0) and moved["left_m"] == pytest.approx(1.0)
    assert moved["yaw_rad"] == pytest.approx(math.pi / 2 + 0.1)


def test_a_node_that_exits_early_is_reported_with_its_last_words(tmp_path, monkeypatch):
    for k, v in ros_env().items():
        if k.startswith("ROS_"):
            monkeypatch.setenv(k, v)
    nodes = NodeProcesses()
    try:
        nodes.start("sim_bridge_node", {"robot": str(tmp_path / "no_such_robot.yaml")})
        end = time.monotonic() + 60
        while nodes.procs["sim_bridge_node"].poll() is None and time.monotonic() < end:
            time.sleep(0.1)
        with pytest.raises(UserError, match=r"sim_bridge_node exited early: .*no_such_robot.*\(logs: .*sil-logs-"):
            nodes.check_alive()
    finally:
        nodes.stop()
