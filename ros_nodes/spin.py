"""A node's process: `init` (rclpy, with this module's own stop signals), `start` (a node that cannot start says why
in one line and the process exits 2), `spin` on the executor the node's `executor` parameter names, and a clean-up
that a second signal cannot cut short (`ignore_interrupts`).

SIGINT and SIGTERM only ask the spin to stop; the context stays up until the node is destroyed. rclpy's own handlers
shut the context down from their own thread while the node's subscriptions still take messages: under load the
middleware's listener thread then crashed the process (SIGSEGV) before the recorder had finalised its segment.

A node can get SIGINT twice: Ctrl-C reaches every process of `ros2 launch`'s process group, and a non-interactive
launch (no terminal: a service, CI) sends each node one of its own; systemd sends SIGTERM to all of them before launch
sends SIGINT. The first one stops the node; the rest must not interrupt what it does on the way out (the recorder
finalising its last segment, the twin's threads joining).
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable
from typing import TypeVar

import rclpy
from rclpy.exceptions import ParameterException
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.impl.implementation_singleton import rclpy_implementation
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions

from edge.errors import UserFixableError

N = TypeVar("N", bound=Node)
EXECUTORS = ("events", "single")
RCLError = rclpy_implementation.RCLError
# what a node's constructor raises for a bad parameter (a wrong type or range in a parameter file, a missing file)
START_ERRORS = (ValueError, OSError, UserFixableError, ParameterException)


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_stop = threading.Event()  # a stop signal arrived: the spin ends
_started = threading.Event()  # the node is built: a stop signal no longer interrupts, it only sets `_stop`


def ignore_interrupts() -> None:
    """From here on the process only cleans up: further SIGINTs are ignored (SIGTERM still ends it)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _on_stop_signal(signum, frame) -> None:
    if _stop.is_set():
        return  # the second Ctrl-C of a launch: already stopping
    _stop.set()
    if not _started.is_set():
        raise KeyboardInterrupt  # a node being built (loading a model, a twin) stops there


def init(args: list[str] | None = None) -> None:
    """rclpy.init for a node's process, without rclpy's signal handlers: SIGINT and SIGTERM stop the spin, which then
    cleans up with the context still up."""
    for sig in STOP_SIGNALS:
        signal.signal(sig, _on_stop_signal)
    rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)


def start(name: str, make: Callable[[], N]) -> N:
    """The node `make()` builds; when it cannot start (a bad parameter, a missing file): one ERROR line, exit 2."""
    try:
        node = make()
    except START_ERRORS as e:
        rclpy.logging.get_logger(name).error(f"cannot start: {e}")
        rclpy.try_shutdown()
        sys.exit(2)
    except KeyboardInterrupt:  # stopped while starting: nothing to clean up
        rclpy.try_shutdown()
        sys.exit(0)
    _started.set()
    return node


def spin(node: Node, kind: str = "single", on_exit: Callable[[], None] | None = None) -> None:
    """Spin until a stop signal (SIGINT, SIGTERM), then run `on_exit` (the node's own clean-up, which no further SIGINT
    interrupts), destroy the node and shut the context down, in that order. events: rclpy's EventsExecutor (a C++
    event queue, a fraction of the per-callback cost); single: SingleThreadedExecutor, as rclpy.spin."""
    if kind == "events":
        from rclpy.experimental import EventsExecutor

        executor = EventsExecutor()
    else:
        if kind not in EXECUTORS:
            node.get_logger().error(f"executor {kind!r}: use {' or '.join(EXECUTORS)}; running single")
        executor = SingleThreadedExecutor()
    executor.add_node(node)
    try:
        # spin_once with a timeout, so a stop signal ends the loop within 0.1 s (and the EventsExecutor's spin(), in
        # rclpy 7.1, busy-loops without running timers)
        while not _stop.is_set() and rclpy.ok():
            try:
                executor.spin_once(timeout_sec=0.1)
            except RCLError as e:
                # rclpy 7.1 raises out of a lifecycle node's change_state callback for a request by id of a
                # transition the current state does not offer (a request by label gets success=false): refuse it
                # here, the node stays up; the requester gets no reply
                node.get_logger().warn(f"refused lifecycle transition request: {str(e).splitlines()[0]}")
    except ExternalShutdownException:
        pass
    finally:
        ignore_interrupts()
        # as rclpy.spin does: the executor lets go of the node before anything is destroyed (the EventsExecutor keeps
        # middleware callbacks on the node's entities until then)
        executor.remove_node(node)
        executor.shutdown()
        if on_exit is not None:
            on_exit()
        node.destroy_node()
        rclpy.try_shutdown()
