"""field_recorder over real DDS: MCAP that third-party readers read, atomic segments, clean stop on signals."""

import signal
import time
from collections import Counter
from pathlib import Path

import pytest
from mcap.reader import make_reader
from mcap_ros2.decoder import DecoderFactory
from rosbags.highlevel import AnyReader

from tests.ros_helpers import node_process

SENSORS = {"/joint_states", "/imu/data", "/odom"}


def topic_counts(bag_dir: Path) -> Counter:
    counts = Counter()
    for mcap in sorted(bag_dir.glob("*.mcap")):
        with open(mcap, "rb") as f:
            for _, channel, _, _ in make_reader(f, decoder_factories=[DecoderFactory()]).iter_decoded_messages():
                counts[channel.topic] += 1
    return counts


@pytest.mark.parametrize("stop_signal", [signal.SIGINT, signal.SIGTERM])
def test_recording_is_finalised_and_readable(tmp_path, stop_signal):
    out = tmp_path / "logs"
    with node_process("ros_nodes.sim_bridge_node", "robot:=rover"):
        with node_process("ros_nodes.field_recorder", f"output_dir:={out}", stop_signal=stop_signal) as rec:
            assert rec.wait_for_output("recording /odom"), rec.output
            time.sleep(2.0)  # about 100 control periods at 50 Hz
    assert rec.returncode == 0, rec.output  # a clean exit: no crash while the middleware still delivers messages
    segments = [p for p in out.iterdir() if p.is_dir() and not p.name.startswith(".")]
    assert len(segments) == 1, rec.output
    assert f"finalised {segments[0]}" in rec.output
    assert not any((out / ".partial").iterdir())  # finalised, nothing left half-written
    counts = topic_counts(segments[0])
    assert SENSORS <= set(counts), counts
    assert min(counts[t] for t in SENSORS) > 40  # 2 s at 50 Hz, minus discovery
    # a second, independent reader agrees on what is in the bag (rosbag2 layout with metadata.yaml)
    with AnyReader([segments[0]]) as reader:
        assert sum(c.msgcount for c in reader.connections) == sum(counts.values())
        assert {c.msgtype for c in reader.connections} >= {"sensor_msgs/msg/JointState", "nav_msgs/msg/Odometry"}


def test_a_legged_robot_logs_its_foot_forces_and_field_analysis_scores_its_gait(tmp_path):
    from sim.campaign.rollout import robot_limits
    from sim.gait import GRAVITY
    from sim.robot import load_robot
    from training.retrain.drift import ingest_logs
    from training.retrain.ingest import log_files, read_field_log

    out, spec = tmp_path / "logs", load_robot("quadruped")
    # no joint_commands: after cmd_timeout_s the bridge holds the default pose, so the robot stands on four feet
    with node_process("ros_nodes.sim_bridge_node", "robot:=quadruped", "safe_mode:=hold"):
        with node_process("ros_nodes.field_recorder", f"output_dir:={out}") as rec:
            assert rec.wait_for_output("recording /foot_forces"), rec.output
            time.sleep(2.0)
    kpis = ingest_logs(log_files(out), spec)["field_kpis"]
    assert kpis["duty_factor"] > 0.9, kpis  # four feet down: the twin's contacts came through DDS and MCAP
    assert kpis["trot_index"] == 0.0 and kpis["mean_air_time_s"] == 0.0, kpis
    forces = read_field_log(log_files(out)[0], list(spec.joints), len(spec.feet)).foot_force[-25:]
    weight = robot_limits(spec).mass_kg * GRAVITY
    assert forces.sum(axis=1).mean() == pytest.approx(weight, rel=0.1)  # standing still, the feet carry its weight


def test_segments_rotate(tmp_path):
    out = tmp_path / "logs"
    with node_process("ros_nodes.sim_bridge_node", "robot:=rover"):
        with node_process(
            "ros_nodes.field_recorder", f"output_dir:={out}", "segment_s:=1.0", "topics:=['/joint_states']"
        ):
            time.sleep(8.0)
    segments = sorted(p for p in out.iterdir() if p.is_dir() and not p.name.startswith("."))
    assert len(segments) >= 3
    assert all(topic_counts(s)["/joint_states"] > 0 for s in segments[:-1])


def _publish_instructions(node, executor, until, timeout: float = 30.0, size: int = 1000) -> int:
    """Publish numbered /instruction strings of `size` bytes as fast as this process can, until `until()` holds
    (checked every 50 messages) or `timeout` seconds pass; returns how many were sent."""
    from std_msgs.msg import String

    pub = node.create_publisher(String, "/instruction", 100)
    end, seq = time.monotonic() + timeout, 0
    while time.monotonic() < end:
        pub.publish(String(data=f"{seq:08d}".ljust(size, "x")))
        seq += 1
        executor.spin_once(timeout_sec=0)
        if seq % 50 == 0:
            if until():
                break
            time.sleep(0.005)  # leave the recorder some of the 2 cores
    return seq


def _partial_bytes(out: Path) -> int:
    return sum(f.stat().st_size for f in (out / ".partial").glob("*/*.mcap"))


def _sequence_numbers(mcap_path: Path) -> list[int]:
    """The numbers of the /instruction messages readable from an MCAP file, complete or cut short."""
    from mcap.reader import NonSeekingReader
    from rosbags.typesys import Stores, get_typestore

    typestore, seqs = get_typestore(Stores.ROS2_JAZZY), []
    with open(mcap_path, "rb") as f:
        try:
            for _, channel, message in NonSeekingReader(f).iter_messages(log_time_order=False):
                if channel.topic == "/instruction":
                    seqs.append(int(typestore.deserialize_cdr(message.data, "std_msgs/msg/String").data[:8]))
        except Exception:  # noqa: BLE001 - a file cut by SIGKILL ends in a partial record
            pass
    return seqs


def test_sigkill_loses_only_the_open_chunk(tmp_path):
    """A recorder killed mid-recording: its next start recovers every message of the chunks it completed, once."""
    from tests.ros_helpers import probe_node
    from training.retrain.ingest import log_files

    out = tmp_path / "logs"
    args = (f"output_dir:={out}", "topics:=['/instruction']", "segment_s:=600.0")
    with probe_node() as (node, executor):
        with node_process("ros_nodes.field_recorder", *args) as rec:
            time.sleep(1.5)  # started and subscribed once the publisher appears
            # until a few 1 MiB chunks are complete on disk
            _publish_instructions(node, executor, until=lambda: _partial_bytes(out) > 3_000_000)
            rec.kill()
            rec.wait()
        partial = next((out / ".partial").glob("*/*.mcap"))
        flushed = _sequence_numbers(partial)
        assert len(flushed) > 500, f"{len(flushed)} messages readable after SIGKILL"
        assert flushed == sorted(flushed)
        with node_process("ros_nodes.field_recorder", *args) as restarted:
            assert restarted.wait_for_output("recovered", timeout=30), restarted.output
            # recording again before it is stopped: its own segment is finalised at SIGINT, not left for recovery
            assert restarted.wait_for_output("recording /instruction", timeout=30), restarted.output
    recovered = [p for p in out.iterdir() if p.name.endswith("-recovered")]
    left = sorted(p.name for p in (out / ".partial").iterdir())
    assert len(recovered) == 1 and not left, (left, restarted.returncode, restarted.output[-2000:])
    files = log_files(out)
    assert next(recovered[0].glob("*.mcap")) in files  # ingest reads the recovered segment
    assert _sequence_numbers(next(recovered[0].glob("*.mcap"))) == flushed  # every flushed message, once
    with AnyReader([recovered[0]]) as reader:  # a finalised rosbag2 segment, metadata included
        assert sum(c.msgcount for c in reader.connections) == len(flushed)


def test_a_sil_run_recovers_what_a_recorder_killed_at_its_stop_left(tmp_path, monkeypatch):
    """run_sil's stop: the recorder stops after the nodes that publish, and a recorder killed before it finalised
    (a loaded machine past the grace) leaves no log behind `.partial/`, where the loop's analysis does not look: its
    complete chunks are recovered into a finalised segment, with a WARN."""
    from sim2real.sil.processes import NodeProcesses
    from sim2real.sil.run import recover_recording
    from tests.ros_helpers import probe_node, ros_env
    from training.retrain.ingest import log_files

    for k, v in ros_env().items():
        if k.startswith("ROS_"):
            monkeypatch.setenv(k, v)
    out = tmp_path / "logs"
    nodes = NodeProcesses()
    try:
        nodes.start("field_recorder", {"output_dir": out, "topics": "['/instruction']", "segment_s": 600.0})
        with probe_node() as (node, executor):
            time.sleep(1.5)
            _publish_instructions(node, executor, until=lambda: _partial_bytes(out) > 2_000_000)
        nodes.procs["field_recorder"].kill()
        nodes.procs["field_recorder"].wait()
    finally:
        killed = nodes.stop()
    assert killed == [] and log_files(out) == []  # nothing finalised: the run's log is all under .partial/
    flushed = _sequence_numbers(next((out / ".partial").glob("*/*.mcap")))
    with pytest.warns(UserWarning, match=r"field_recorder exited before finalising its segment: recovered \d+"):
        (recovered,) = recover_recording(str(out), killed)
    assert recovered["messages"] == len(flushed) > 500
    (segment,) = log_files(out)
    assert segment.parent == Path(recovered["segment"]) and _sequence_numbers(segment) == flushed
    assert recover_recording(str(out), killed) == [] and recover_recording("", killed) == []


def test_disk_full_keeps_what_was_written_and_reports_error(tmp_path):
    """A recorder that can write only 2 MB (RLIMIT_FSIZE: writes fail with EFBIG as on a full disk) stays up, says
    ERROR on /diagnostics, and what it wrote stays readable and is recovered on its next start."""
    import resource
    import subprocess
    import sys

    from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus

    from tests.ros_helpers import probe_node, ros_env, spin_until

    out = tmp_path / "logs"
    limit = 2_000_000

    def small_disk():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    cmd = [sys.executable, "-m", "ros_nodes.field_recorder", "--ros-args", "-p", f"output_dir:={out}",
           "-p", "topics:=['/instruction']"]  # fmt: skip
    proc = subprocess.Popen(cmd, env=ros_env(), preexec_fn=small_disk, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)  # fmt: skip
    try:
        with probe_node() as (node, executor):
            errors = []
            node.create_subscription(
                DiagnosticArray,
                "/diagnostics",
                lambda m: errors.extend(s.message for s in m.status if s.level == DiagnosticStatus.ERROR),
                10,
            )
            time.sleep(1.5)
            _publish_instructions(node, executor, until=lambda: bool(errors))
            assert spin_until(executor, lambda: bool(errors), timeout=10), "no ERROR on /diagnostics"
            assert "recording stopped" in errors[0]
            assert proc.poll() is None  # still up
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=10)
    partial = next((out / ".partial").glob("*/*.mcap"))
    kept = _sequence_numbers(partial)
    assert len(kept) > 500 and partial.stat().st_size <= limit
    with node_process("ros_nodes.field_recorder", f"output_dir:={out}", "topics:=['/instruction']") as rec:
        assert rec.wait_for_output("recovered", timeout=30), rec.output
    recovered = next(p for p in out.iterdir() if p.name.endswith("-recovered"))
    assert _sequence_numbers(next(recovered.glob("*.mcap"))) == kept
