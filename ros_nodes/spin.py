"""Spinning a node on the executor its `executor` parameter names."""

from __future__ import annotations

import rclpy
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.impl.implementation_singleton import rclpy_implementation
from rclpy.node import Node

EXECUTORS = ("events", "single")
RCLError = rclpy_implementation.RCLError


def spin(node: Node, kind: str) -> None:
    """Spin until shutdown (SIGINT, SIGTERM), then destroy the node. events: rclpy's EventsExecutor (a C++ event
    queue, a fraction of the per-callback cost); single: SingleThreadedExecutor."""
    if kind == "events":
        from rclpy.experimental import EventsExecutor

        executor = EventsExecutor()
    else:
        if kind not in EXECUTORS:
            node.get_logger().error(f"executor {kind!r}: use {' or '.join(EXECUTORS)}; running single")
        executor = SingleThreadedExecutor()
    executor.add_node(node)
    try:
        # spin_once with a timeout: the EventsExecutor's spin() (rclpy 7.1) busy-loops without running timers
        while rclpy.ok():
            try:
                executor.spin_once(timeout_sec=0.1)
            except RCLError as e:
                # rclpy 7.1 raises out of a lifecycle node's change_state callback for a request by id of a
                # transition the current state does not offer (a request by label gets success=false): refuse it
                # here, the node stays up; the requester gets no reply
                node.get_logger().warn(f"refused lifecycle transition request: {str(e).splitlines()[0]}")
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except RuntimeError:
        if rclpy.ok():
            raise  # otherwise a message take that raced the SIGINT shutdown: nothing is lost
    finally:
        node.destroy_node()
        rclpy.try_shutdown()
