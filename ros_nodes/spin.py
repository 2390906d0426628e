"""A node's process: `init` (rclpy with SIGINT taken once), `start` (a node that cannot start says why in one line
and the process exits 2), `spin` on the executor the node's `executor` parameter names, and a clean-up that a second
SIGINT cannot cut short (`ignore_interrupts`).

A node can get SIGINT twice: Ctrl-C reaches every process of `ros2 launch`'s process group, and a non-interactive
launch (no terminal: a service, CI) sends each node one of its own; systemd sends SIGTERM to all of them before launch
sends SIGINT. The first one stops the node; the rest must not interrupt what it does on the way out (the recorder
finalising its last segment, policy_node commanding the safe mode).
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable
from typing import TypeVar

import rclpy
from rclpy.exceptions import ParameterException
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.impl.implementation_singleton import rclpy_implementation
from rclpy.node import Node

from edge.errors import UserFixableError

N = TypeVar("N", bound=Node)
EXECUTORS = ("events", "single")
RCLError = rclpy_implementation.RCLError
# what a node's constructor raises for a bad parameter (a wrong type or range in a parameter file, a missing file)
START_ERRORS = (ValueError, OSError, UserFixableError, ParameterException)


def ignore_interrupts() -> None:
    """From here on the process only cleans up: further SIGINTs are ignored (SIGTERM still ends it)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _first_interrupt(signum, frame) -> None:
    ignore_interrupts()
    raise KeyboardInterrupt


def init(args: list[str] | None = None) -> None:
    """rclpy.init for a node's process. rclpy's own handler (it shuts the context down) chains to this one, which
    raises KeyboardInterrupt once and ignores every later SIGINT."""
    signal.signal(signal.SIGINT, _first_interrupt)
    rclpy.init(args=args)


def start(name: str, make: Callable[[], N]) -> N:
    """The node `make()` builds; when it cannot start (a bad parameter, a missing file): one ERROR line, exit 2."""
    try:
        return make()
    except START_ERRORS as e:
        rclpy.logging.get_logger(name).error(f"cannot start: {e}")
        rclpy.try_shutdown()
        sys.exit(2)
    except KeyboardInterrupt:  # stopped while starting: nothing to clean up
        rclpy.try_shutdown()
        sys.exit(0)
    except Exception:
        if rclpy.ok():
            raise  # a bug
        sys.exit(0)  # a SIGINT shut the context down under the node while it was being built


def spin(node: Node, kind: str = "single", on_exit: Callable[[], None] | None = None) -> None:
    """Spin until shutdown (SIGINT, SIGTERM), then run `on_exit` (the node's own clean-up, which no further SIGINT
    interrupts) and destroy the node. events: rclpy's EventsExecutor (a C++ event queue, a fraction of the
    per-callback cost); single: SingleThreadedExecutor, as rclpy.spin. A message take that races the shutdown
    (rclpy raises from inside the executor when the context goes away under it) ends the spin quietly: every node
    spins here, so none prints that race's traceback at Ctrl-C."""
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
                if not rclpy.ok():
                    break  # a take that raced the shutdown
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
        ignore_interrupts()
        # as rclpy.spin does: the executor lets go of the node before anything is destroyed (the EventsExecutor keeps
        # middleware callbacks on the node's entities until then)
        executor.remove_node(node)
        executor.shutdown()
        if on_exit is not None:
            on_exit()
        node.destroy_node()
        rclpy.try_shutdown()
