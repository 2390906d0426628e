"""field_recorder: record ROS 2 topics to MCAP in the rosbag2 layout, as `ros2 bag record -s mcap` does.

Messages are written as the CDR bytes they arrived in (raw subscriptions, no deserialise/serialise). Each
segment is written under `<output_dir>/.partial/<name>/` and moved to `<output_dir>/<name>/` once its MCAP is
finalised, so a reader never sees a half-written segment under a final name; segments rotate by duration and
size. SIGINT and SIGTERM finalise the open segment. A kill -9 or a power loss leaves `.partial/<name>/`: on its
next start the recorder recovers it (recovery.py): the messages of every complete chunk (the writer closes a
chunk at 1 MiB) go into a finalised `<output_dir>/<name>-recovered/`, so a crash loses at most the open chunk.
A write that fails (disk full) stops the recording, keeps what was written, and reports ERROR on diagnostics;
the node stays up. Topic names are relative, so a namespaced recorder logs its own robot's topics (by their full
names, as rosbag2 does).
"""

from __future__ import annotations

import importlib
import os
import time
from pathlib import Path

from diagnostic_msgs.msg import DiagnosticArray
from rclpy.clock import Clock, ClockType
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from rosbags.rosbag2 import StoragePlugin, Writer
from rosbags.typesys import Stores, get_typestore

from ros_nodes.diagnostics import ERROR, OK, diagnostic_array
from ros_nodes.field_recorder_params import FieldRecorderParams
from ros_nodes.params import declare, read
from ros_nodes.qos import STATUS
from ros_nodes.recovery import recover_partial_segments
from ros_nodes.spin import init, spin, start


def message_class(type_name: str):
    """'sensor_msgs/msg/JointState' -> the rclpy message class."""
    package, _, name = type_name.split("/")
    return getattr(importlib.import_module(f"{package}.msg"), name)


class FieldRecorder(Node):
    def __init__(self, **kwargs):
        super().__init__("field_recorder", **kwargs)
        declare(self, FieldRecorderParams)
        p = read(self, FieldRecorderParams)
        self.topics = [self.resolve_topic_name(t) for t in p.topics]
        self.output_dir = Path(p.output_dir)
        self.segment_s = p.segment_s
        self.segment_bytes = p.segment_mb * 1e6
        self.output_dir.mkdir(parents=True, exist_ok=True)
        for r in recover_partial_segments(self.output_dir):
            if r.messages:
                self.get_logger().warn(f"recovered {r.messages} messages of a crashed recording into {r.segment}")
            else:
                self.get_logger().warn(f"a crashed recording left nothing readable ({r.damage}); removed it")
        self.failure = ""  # why recording stopped (a failed write: disk full); the node stays up and reports it
        self.typestore = get_typestore(Stores.ROS2_JAZZY)
        self.counts: dict[str, int] = {t: 0 for t in self.topics}
        self._types: dict[str, str] = {}
        self._subs = []
        self._writer: Writer | None = None
        self._connections: dict = {}
        self._segment_index = 0
        self._segment_started = 0.0
        self._segment_bytes = 0
        # topics appear as their publishers start: look for them, as `ros2 bag record` does, on the wall clock (under
        # use_sim_time a timer on /clock would wait for a simulation that may wait for this recorder)
        steady = Clock(clock_type=ClockType.STEADY_TIME)
        self.create_timer(0.2, self._discover, clock=steady)
        self.pub_diag = self.create_publisher(DiagnosticArray, "diagnostics", STATUS)
        self.create_timer(1.0, self._publish_diagnostics, clock=steady)
        self._discover()
        # last: a SIGINT during start-up (the context shut down under a call above) leaves no segment behind
        self._open_segment()

    def _discover(self) -> None:
        available = dict(self.get_topic_names_and_types())
        for topic in self.topics:
            if topic in self._types or topic not in available:
                continue
            type_name = available[topic][0]
            publishers = self.get_publishers_info_by_topic(topic)
            if publishers:
                best_effort = any(p.qos_profile.reliability == ReliabilityPolicy.BEST_EFFORT for p in publishers)
            elif any(
                s.qos_profile.reliability == ReliabilityPolicy.RELIABLE
                for s in self.get_subscriptions_info_by_topic(topic)
            ):
                # no publisher yet, but a reliable subscriber, which hears only reliable publishers: subscribe now
                # so the first messages are not lost while discovery finds the publisher
                best_effort = False
            else:  # the QoS to match is the publishers': wait for one
                continue
            # a best-effort subscriber hears every publisher; a reliable one only reliable publishers
            qos = QoSProfile(
                depth=1000, reliability=ReliabilityPolicy.BEST_EFFORT if best_effort else ReliabilityPolicy.RELIABLE
            )
            self._types[topic] = type_name
            self._subs.append(
                self.create_subscription(
                    message_class(type_name), topic, lambda data, t=topic: self._on_message(t, data), qos, raw=True
                )
            )
            self.get_logger().info(f"recording {topic} [{type_name}]")

    def _open_segment(self) -> None:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        name = f"field_{stamp}_{self._segment_index:04d}"
        self._final_path = self.output_dir / name
        self._partial_path = self.output_dir / ".partial" / name
        self._partial_path.parent.mkdir(exist_ok=True)
        self._writer = Writer(self._partial_path, version=9, storage_plugin=StoragePlugin.MCAP)
        self._writer.open()
        self._connections = {}
        self._segment_started = time.monotonic()
        self._segment_bytes = 0
        self._segment_index += 1

    def _close_segment(self) -> None:
        if self._writer is None:
            return
        self._writer.close()
        self._writer = None
        os.replace(self._partial_path, self._final_path)
        self.get_logger().info(f"finalised {self._final_path}")

    def _on_message(self, topic: str, data: bytes) -> None:
        if self._writer is None:
            return
        try:
            self._write(topic, data)
        except OSError as e:  # disk full or gone: keep what is on disk (recovered on the next start), stay up
            self.failure = f"recording stopped: {e.strerror or e} writing {self._partial_path}"
            self._writer = None
            self.get_logger().error(self.failure)
            self._publish_diagnostics()

    def _write(self, topic: str, data: bytes) -> None:
        full = (time.monotonic() - self._segment_started > self.segment_s) or self._segment_bytes > self.segment_bytes
        if full and self._segment_bytes > 0:  # never finalise an empty segment
            self._close_segment()
            self._open_segment()
        conn = self._connections.get(topic)
        if conn is None:
            conn = self._writer.add_connection(topic, self._types[topic], typestore=self.typestore)
            self._connections[topic] = conn
        self._writer.write(conn, self.get_clock().now().nanoseconds, data)
        self._segment_bytes += len(data)
        self.counts[topic] += 1

    def _publish_diagnostics(self) -> None:
        level = ERROR if self.failure else OK
        message = self.failure or f"recording {len(self._types)} of {len(self.topics)} topics"
        counts = {t: str(n) for t, n in self.counts.items()}
        stamp = self.get_clock().now().to_msg()
        self.pub_diag.publish(
            diagnostic_array(self.get_fully_qualified_name(), level, message, "field_recorder", counts, stamp)
        )

    def close(self) -> None:
        try:
            self._close_segment()
        except OSError:  # disk full at the end: the partial segment stays for recovery on the next start
            self._writer = None


def main(args: list[str] | None = None) -> None:
    init(args)  # rclpy's SIGINT/SIGTERM handlers shut the context down
    node = start("field_recorder", FieldRecorder)
    spin(node, on_exit=node.close)  # the last segment is finalised whatever signals follow


if __name__ == "__main__":
    main()
