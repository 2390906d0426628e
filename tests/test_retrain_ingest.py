"""Field-log ingest: aligned arrays from real MCAP, episodes by command changes, damage reported not raised."""

import numpy as np
import pytest

from sim.kpis import RobotLimits, episode_kpis
from tests.field_logs import JOINTS, write_log
from training.errors import TrainingError
from training.retrain.ingest import command_issue_times, log_files, read_field_log

SCRIPT = [(3.0, 0.5, 0.0, 0.0), (3.0, 0.0, 0.0, 0.8), (2.0, 0.3, 0.0, -0.5)]
LIMITS = RobotLimits(np.full(2, -np.inf), np.full(2, np.inf), np.full(2, 8.0), 0.8, 0.05)


def test_log_is_aligned_and_segmented(tmp_path):
    log = read_field_log(write_log(tmp_path / "a.mcap", SCRIPT), JOINTS)
    assert log.damage == []
    assert len(log.t) == 400 and log.dt == pytest.approx(0.02)
    assert [s.stop - s.start for s in log.episodes()] == [150, 150, 100]
    assert np.allclose(log.commands[log.episodes()[1]][:, 2], 0.8)
    assert np.allclose(log.projected_gravity, [0, 0, -1])


def test_drifted_robot_scores_worse_with_the_campaign_kpis(tmp_path):
    def lin_error(lag):
        log = read_field_log(write_log(tmp_path / f"lag{lag}.mcap", SCRIPT, lag=lag), JOINTS)
        first = log.episodes()[0]
        return float(episode_kpis(log.trajectory(first), LIMITS, settle_s=0.5)["tracking_error_lin"])

    assert lin_error(0.3) > 5 * lin_error(0.02)


def test_truncated_log_keeps_what_came_before_and_says_where(tmp_path):
    path = write_log(tmp_path / "full.mcap", SCRIPT)
    data = path.read_bytes()
    cut = tmp_path / "cut.mcap"
    cut.write_bytes(data[: len(data) // 2])
    log = read_field_log(cut, JOINTS)
    assert 50 < len(log.t) < 400
    assert len(log.damage) == 1 and "cut.mcap: unreadable from byte" in log.damage[0]


@pytest.mark.parametrize("content", [b"", b"not an mcap file at all", b"\x89MCAP0\r\n" + b"\xff" * 64])
def test_corrupt_log_is_reported_not_raised(tmp_path, content):
    bad = tmp_path / "bad.mcap"
    bad.write_bytes(content)
    log = read_field_log(bad, JOINTS)
    assert len(log.t) == 0 and log.episodes() == []
    assert log.damage and "bad.mcap" in log.damage[0]


def test_partial_segments_are_skipped(tmp_path):
    (tmp_path / "field_1").mkdir()
    write_log(tmp_path / "field_1" / "field_1.mcap", SCRIPT)
    (tmp_path / ".partial" / "field_2").mkdir(parents=True)
    write_log(tmp_path / ".partial" / "field_2" / "field_2.mcap", SCRIPT)
    assert [p.name for p in log_files(tmp_path)] == ["field_1.mcap"]
    with pytest.raises(TrainingError, match="no field log"):
        log_files(tmp_path / "missing")


def test_commands_are_attributed_to_the_states_they_answered():
    """A recorder in lockstep logs each command after the state it answered and often after the next state too
    (then the newest state logged before it is one period late); now and then it logs a command before its state
    (one period early)."""
    ms, rng = 1_000_000, np.random.default_rng(0)
    answered = np.arange(200) * 20
    shift = rng.choice([0, 20], size=200, p=[0.6, 0.4])
    shift[[50, 120]] = -20
    issued = command_issue_times((answered + shift + 1) * ms, (answered + shift) * ms)
    assert issued.tolist() == (answered * ms).tolist()
    # a step without a command: only the last few commands before it can be attributed a period late (the
    # later level dominates their window); everything after it is right again
    skipped = np.delete(answered, 100) + 20 * (np.arange(199) >= 100)
    shift = rng.choice([0, 20], size=199, p=[0.6, 0.4])
    issued = command_issue_times((skipped + shift + 1) * ms, (skipped + shift) * ms)
    wrong = np.flatnonzero(issued != skipped * ms)
    assert len(wrong) <= 5 and all(95 <= i < 100 for i in wrong)


def test_a_damaged_schema_is_a_damage_note_not_console_noise(tmp_path, capfd):
    """The vendored rosidl parser prints each bad schema line; ingest keeps the console to its own report."""
    from mcap.writer import Writer

    bad = tmp_path / "bad_schema.mcap"
    with bad.open("wb") as f:
        writer = Writer(f)
        writer.start(profile="ros2")
        schema = writer.register_schema("geometry_msgs/Twist", "ros2msg", b"geometry_msgs/=ector3 linear\n")
        channel = writer.register_channel("/cmd_vel", "cdr", schema)
        writer.add_message(channel, log_time=1, publish_time=1, data=b"\x00\x01\x00\x00" + bytes(48))
        writer.finish()
    log = read_field_log(bad, JOINTS)
    assert log.damage and "bad_schema.mcap" in log.damage[0]
    out, err = capfd.readouterr()
    assert "Error processing" not in err + out and "Error with" not in err + out


def trot(step: int) -> list[float]:
    """A trot at 2.5 Hz: the diagonal pairs (feet 0+3, 1+2) swap every 10 steps (0.2 s); 60 N down, 0 up."""
    first_pair_down = (step // 10) % 2 == 0
    return [60.0 if first_pair_down == (foot in (0, 3)) else 0.0 for foot in range(4)]


def test_foot_forces_give_the_gait_kpis_of_field_analysis(tmp_path):
    from training.retrain.drift import field_kpis

    walk = [(4.0, 0.5, 0.0, 0.0)]
    log = read_field_log(write_log(tmp_path / "trot.mcap", walk, foot_forces=trot), JOINTS, feet=4)
    assert log.foot_force.shape == (200, 4)
    kpis = field_kpis([log], LIMITS)
    assert kpis.episodes == 1
    kpis = kpis.means
    assert kpis["trot_index"] == pytest.approx(1.0)
    assert kpis["duty_factor"] == pytest.approx(0.5, abs=0.01)
    assert kpis["mean_air_time_s"] == pytest.approx(0.2)  # completed flights of 10 steps at 50 Hz
    assert "foot_slip_m_s" not in kpis  # foot speeds are not measured on a robot

    stand = read_field_log(write_log(tmp_path / "stand.mcap", walk, foot_forces=lambda _: [60.0] * 4), JOINTS, feet=4)
    kpis = field_kpis([stand], LIMITS).means
    assert (kpis["duty_factor"], kpis["trot_index"], kpis["mean_air_time_s"]) == (1.0, 0.0, 0.0)

    # a rover log, a reader that expects no feet, or forces of another foot count: no gait KPIs, no error
    assert (
        "trot_index"
        not in field_kpis([read_field_log(write_log(tmp_path / "r.mcap", walk), JOINTS, feet=4)], LIMITS).means
    )
    assert read_field_log(tmp_path / "trot.mcap", JOINTS).foot_force is None
    assert read_field_log(tmp_path / "trot.mcap", JOINTS, feet=3).foot_force is None
