"""System identification recovers planted twin parameters from a log of the 'field' robot, with 95% intervals that
hold them, and says which parameters a log does not determine."""

import dataclasses

import numpy as np
import pytest

from edge.observation import projected_gravity
from sim.controllers import DiffDriveController
from sim.randomization import RandomizationConfig, fixed_params
from sim.robot import load_robot
from sim.twin import BatchedTwin
from training.retrain.ingest import FieldLog
from training.retrain.sysid import SysIdConfig, _at_bound, _Fit, identify, log_windows, replay_errors

PLANTED = {"payload_kg": 3.0, "latency_s": 0.02}  # the field robot: heavier and laggier than the nominal twin
SCRIPT = [(1.0, 0.8, 0.0), (1.0, 0.0, 1.2), (1.0, -0.5, 0.0), (1.0, 0.4, -1.0)]


def record(twin: BatchedTwin, drive) -> FieldLog:
    """What the field robot logs while `drive` (yielding one action per control step, after setting commands)
    moves it: the state it starts from and passes through, joint targets and base velocities, as an MCAP log
    reads."""
    spec, rows = twin.spec, []
    offset = np.asarray(spec.default_pose) if spec.control_mode == "position" else 0.0
    for action in drive:
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
                offset + spec.action_scale * action[0],  # the joint targets /joint_commands carries
                s["base_quat"][0],
            )
        )
    cmd, lin, ang, grav, z, jp, jv, targets, quat = (np.array(c) for c in zip(*rows, strict=True))
    return FieldLog(None, np.arange(len(rows)) * spec.control_dt, cmd, lin, ang, grav, z, jp, jv, targets, [], quat)


def noisy(log: FieldLog, std: float = 0.01, seed: int = 0) -> FieldLog:
    """The log as a robot's odometry and gyro give it: base velocities with white noise (m/s, rad/s). Without it
    a twin's own log determines even what moves its base by 1e-10 m/s."""
    rng = np.random.default_rng(seed)
    lin, ang = log.base_lin_vel, log.base_ang_vel
    return dataclasses.replace(
        log, base_lin_vel=lin + rng.normal(0, std, lin.shape), base_ang_vel=ang + rng.normal(0, std, ang.shape)
    )


def field_twin(robot: str, planted: dict) -> BatchedTwin:
    spec = load_robot(robot)
    twin = BatchedTwin(spec, num_envs=1, seed=3, randomization=RandomizationConfig(enabled=False)).hold_commands()
    twin.reset()  # a random yaw and small random velocities
    twin.set_params(fixed_params(planted, spec.sim_dt))
    return twin


@pytest.fixture(scope="module")
def field_log():
    """The rover, heavier and laggier than its twin, driven by the hand-written controller."""
    twin = field_twin("rover", PLANTED)
    controller = DiffDriveController(twin)

    def drive():
        for seconds, vx, wz in SCRIPT:
            twin.set_commands(np.array([vx, 0.0, wz]))
            for _ in range(int(round(seconds / twin.spec.control_dt))):
                yield controller()

    log = record(twin, drive())
    return twin.spec, log, log_windows([log], 0.1, 12)


@pytest.fixture(scope="module")
def noisy_windows(field_log):
    spec, log, _ = field_log
    return log_windows([noisy(log)], 0.1, 12)


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
    # the joints replay too: the wheels' positions add to the error of the wrong twin only
    with_joints = replay_errors(spec, windows, [PLANTED, {}], joint_pos_weight=1.0)
    assert with_joints[0] < 1e-12 and with_joints[1] > nominal_error


def test_identification_recovers_planted_parameters(field_log, noisy_windows):
    spec, _, _ = field_log
    windows = noisy_windows
    result = identify(spec, windows, SysIdConfig(params=("payload_kg", "latency_s"), population=8, generations=12))
    assert result.values["payload_kg"] == pytest.approx(PLANTED["payload_kg"], rel=0.15)
    assert result.values["latency_s"] == pytest.approx(PLANTED["latency_s"], abs=1e-9)
    assert result.error_after < 0.3 * result.error_before
    for name, estimate in result.estimates.items():  # each interval holds the planted value
        assert estimate.low <= PLANTED[name] <= estimate.high, (name, estimate)
    # the delay is determined; 12 windows of 0.1 s with noisy start states leave the payload's interval wide (each
    # window counts as one observation: the noise of its start state is on every step of it), and it says so
    assert result.undetermined == ["payload_kg"]
    assert "95% interval spans" in result.estimates["payload_kg"].why


def test_search_candidates_that_fit_as_well_widen_an_interval(field_log, noisy_windows):
    """An interval takes in the values among the search's own candidates that a likelihood-ratio test cannot tell
    from the fit (a valley along no one parameter shows there), and leaves out those that fit worse."""
    spec, _, _ = field_log
    fit = _Fit(spec, noisy_windows, SysIdConfig(params=("payload_kg", "latency_s")))
    near, far = {**PLANTED, "payload_kg": 2.7}, {**PLANTED, "payload_kg": 0.0}
    fit.samples, fit.sample_errors = [near, far], fit.errors([near, far])
    assert fit.sample_errors[1] > 2 * fit.sample_errors[0]
    at_fit = float(fit.errors([PLANTED])[0])
    ranges = fit.sampled_ranges(PLANTED, at_fit)
    assert ranges["payload_kg"] == (2.7, 2.7) and ranges["latency_s"] == (0.02, 0.02)
    fit.samples, fit.sample_errors = [far], fit.sample_errors[1:]
    assert fit.sampled_ranges(PLANTED, at_fit) == {}  # nothing sampled fits as well


def test_a_fit_at_the_edge_of_its_search_box_is_not_determined(field_log):
    """A payload box that ends at the planted 3 kg: the fit there replays the log exactly and its interval is
    narrow, but a search stopped at an edge may have been cut off by it, so it is not determined; the delay, inside
    its box, is. A delay at 0, where a delay ends, is no edge."""
    spec, _, windows = field_log
    fit = _Fit(spec, windows, SysIdConfig(params=("payload_kg", "latency_s"), bounds={"payload_kg": (-1.0, 3.0)}))
    estimates = fit.intervals(PLANTED, float(fit.errors([PLANTED])[0]))
    assert not estimates["payload_kg"].determined
    assert estimates["payload_kg"].why == "at the edge of its search box (3): the logs may want a value beyond it"
    assert estimates["latency_s"].determined
    assert _at_bound(0.0, (0.0, 0.1), 0.001) is None and _at_bound(0.1, (0.0, 0.1), 0.001) == 0.1


def test_a_log_that_does_not_excite_a_parameter_does_not_determine_it():
    """The rover stands still: within its odometry's noise its base velocities are the same whatever it carries
    and however late its wheels answer, so neither is determined."""
    twin = field_twin("rover", PLANTED)

    def stand():
        for _ in range(100):
            yield np.zeros((1, twin.spec.num_actions))

    log = noisy(record(twin, stand()))
    cfg = SysIdConfig(params=("payload_kg", "latency_s"))
    result = identify(twin.spec, log_windows([log], 0.1, 8), cfg)
    assert result.undetermined == ["payload_kg", "latency_s"]
    for name, estimate in result.estimates.items():  # the whole box: the log excludes no value
        assert (estimate.low, estimate.high) == cfg.bounds[name] and "95% interval spans" in estimate.why
    assert result.to_dict()["estimates"]["payload_kg"]["determined"] is False


def test_unknown_parameter_and_missing_commands_are_named(field_log):
    spec, _, windows = field_log
    with pytest.raises(ValueError, match="cannot identify gravity"):
        SysIdConfig(params=("gravity",))
    with pytest.raises(ValueError, match="joint_commands"):
        identify(spec, [dataclasses.replace(windows[0], targets=np.full_like(windows[0].targets, np.nan))])
    with pytest.raises(ValueError, match="joint_commands"):
        identify(spec, [])


def stepping_log(planted: dict, encoder_offset: float = 0.0) -> tuple:
    """The quadruped stepping in place (open-loop targets, diagonal pairs in antiphase) as the field robot
    `planted` makes it, its encoders reading `encoder_offset` rad more than each joint's angle: its spec and the
    replay windows of its log."""
    twin = field_twin("quadruped", planted)
    spec = twin.spec
    phase = np.array([0.0, 0.0, 0.0, np.pi, np.pi, np.pi, np.pi, np.pi, np.pi, 0.0, 0.0, 0.0])  # FR+RL, FL+RR
    swing = np.tile([0.0, 0.6, -1.0], 4)  # thigh and calf

    def drive():
        for k in range(150):
            t = k * spec.control_dt
            yield (swing * np.maximum(np.sin(2 * np.pi * 2.0 * t + phase), 0.0) / spec.action_scale * 0.5)[None]

    log = record(twin, drive())
    assert log.base_height.min() > 0.2  # it stayed up: the replays start from standing states
    log = dataclasses.replace(log, joint_pos=log.joint_pos + encoder_offset)
    return spec, log_windows([log], 0.1, 12)


def test_a_quadrupeds_gains_and_delay_are_identified_from_its_joints():
    """Drives at 80% of their kp with 20 ms more delay: the joint positions pin both."""
    spec, windows = stepping_log({"kp_scale": 0.8, "latency_s": 0.02})
    cfg = SysIdConfig(params=("kp_scale", "latency_s"), population=8, generations=12, joint_pos_weight=1.0)
    result = identify(spec, windows, cfg)
    assert result.values["kp_scale"] == pytest.approx(0.8, rel=0.05)
    assert result.values["latency_s"] == pytest.approx(0.02, abs=1e-9)
    assert result.undetermined == [] and result.estimates["kp_scale"].low <= 0.8 <= result.estimates["kp_scale"].high
    assert result.error_after < 0.1 * result.error_before


def test_a_quadrupeds_rotor_inertia_is_identified_from_its_joints():
    """A gearbox's reflected motor inertia (MuJoCo's armature: 0.02 kg m^2 more than the MJCF's 0.01) with 20 ms
    more delay: how fast each joint answers its target pins both."""
    spec, windows = stepping_log({"joint_armature": 0.02, "latency_s": 0.02})
    cfg = SysIdConfig(params=("joint_armature", "latency_s"), population=8, generations=12, joint_pos_weight=1.0)
    result = identify(spec, windows, cfg)
    armature = result.estimates["joint_armature"]
    assert armature.determined and armature.low <= 0.02 <= armature.high
    assert armature.value == pytest.approx(0.02, rel=0.1) and result.values["latency_s"] == pytest.approx(0.02)
    assert result.error_after < 0.1 * result.error_before


def test_an_encoder_offset_is_identified_beside_the_twins_parameters():
    """Encoders that read 0.01 rad more than the joints' angles (the hard quadruped's effect): a sensor's parameter,
    no twin's. The replay starts from the logged positions less the offset and reads its own plus it, so the
    offset and the delay are pinned together; without the offset the true delay replays the log 0.001 wrong."""
    spec, windows = stepping_log({"latency_s": 0.02}, encoder_offset=0.01)
    truth = [{"latency_s": 0.02, "encoder_offset": o} for o in (0.0, 0.01)]
    without, exact = replay_errors(spec, windows, truth, joint_pos_weight=1.0)
    assert without > 1e-4 and exact < 1e-20
    cfg = SysIdConfig(params=("encoder_offset", "latency_s"), population=8, generations=12, joint_pos_weight=1.0)
    result = identify(spec, windows, cfg)
    offset = result.estimates["encoder_offset"]
    assert offset.determined and offset.value == pytest.approx(0.01, abs=5e-4)
    assert offset.low - 1e-6 <= 0.01 <= offset.high + 1e-6 and result.values["latency_s"] == pytest.approx(0.02)


def test_a_drives_lag_is_identified_beside_its_delay():
    """Drives that answer their targets through a 20 ms lag, 20 ms late: a delay shows as dead time and a lag as
    the curve after it, so the joints pin both. Each replay settles the lag over the targets logged before its
    window (0.2 s, ten time constants), so the true values replay the log all but exactly."""
    planted = {"motor_lag_s": 0.02, "latency_s": 0.02}
    spec, windows = stepping_log(planted)
    without, exact = replay_errors(spec, windows, [{"latency_s": 0.02}, planted], joint_pos_weight=1.0)
    assert without > 1e-4 and exact < 1e-6 * without
    cfg = SysIdConfig(params=("motor_lag_s", "latency_s"), population=8, generations=12, joint_pos_weight=1.0)
    result = identify(spec, windows, cfg)
    lag = result.estimates["motor_lag_s"]
    assert lag.determined and lag.low <= 0.02 <= lag.high and lag.value == pytest.approx(0.02, rel=0.1)
    assert result.values["latency_s"] == pytest.approx(0.02)
    assert result.error_after < 0.01 * result.error_before


def test_the_delays_interval_is_profiled_over_the_lag():
    """A fit that took some of the lag as delay (30 ms and a 10 ms lag for the true 20 and 20): the delay's slice
    with the lag held at the fit keeps only 30 ms, but the true delay with its own lag fits better, so the delay's
    interval, profiled over the lag, reaches it, and the lag's reaches the true lag."""
    planted = {"motor_lag_s": 0.02, "latency_s": 0.02}
    spec, windows = stepping_log(planted)
    cfg = SysIdConfig(params=("motor_lag_s", "latency_s"), joint_pos_weight=1.0)
    ranges = _Fit(spec, windows, cfg).slices({"motor_lag_s": 0.01, "latency_s": 0.03})
    assert ranges["latency_s"][0] <= 0.02 + 1e-9 and ranges["latency_s"][1] >= 0.03 - 1e-9
    assert ranges["motor_lag_s"][0] <= 0.01 and ranges["motor_lag_s"][1] >= 0.02 - 0.005  # on its 21-value grid
