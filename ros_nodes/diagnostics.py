"""policy_node's /diagnostics: the control loop's state (the watchdog's level and reason), counters and latency
window, and the DiagnosticArray that reports them."""

from __future__ import annotations

from collections import deque

import numpy as np
from builtin_interfaces.msg import Time
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue

from ros_nodes.watchdog import Fault

OK, WARN, ERROR = DiagnosticStatus.OK, DiagnosticStatus.WARN, DiagnosticStatus.ERROR
LATENCY_WINDOW = 1000  # ticks the latency percentiles are taken over


class LoopStatus:
    def __init__(self) -> None:
        self.level, self.message = WARN, "waiting for inputs"
        self.ticks = 0
        self.deadline_misses = 0  # ticks that came more than 1.5 periods after the one before
        self.fault_ticks = 0  # ticks that held the safe pose
        self.latencies: deque[float] = deque(maxlen=LATENCY_WINDOW)  # seconds, input to command out
        self._last_start: float | None = None

    def tick(self, start: float, period: float) -> None:
        """A tick began at `start` (monotonic seconds)."""
        if self._last_start is not None and start - self._last_start > 1.5 * period:
            self.deadline_misses += 1
        self._last_start, self.ticks = start, self.ticks + 1

    def record(self, fault: Fault | None, latency: float) -> bool:
        """A tick's outcome (the fault that held the safe pose, or None); True when the level changed."""
        self.latencies.append(latency)
        if fault is None:
            level, message = OK, "running"
        else:
            level, message = WARN if fault.stale else ERROR, fault.reason
            self.fault_ticks += 1
        if level == self.level:
            return False
        self.level, self.message = level, message
        return True

    def fields(self) -> dict[str, str]:
        lat = np.array(self.latencies) * 1000 if self.latencies else np.zeros(1)
        return {
            "latency_p50_ms": f"{np.percentile(lat, 50):.3f}",
            "latency_p99_ms": f"{np.percentile(lat, 99):.3f}",
            "ticks": str(self.ticks),
            "deadline_misses": str(self.deadline_misses),
            "fault_ticks": str(self.fault_ticks),
        }


def diagnostic_array(
    name: str, level: bytes, message: str, hardware_id: str, fields: dict[str, str], stamp: Time
) -> DiagnosticArray:
    status = DiagnosticStatus(level=level, name=name, message=message, hardware_id=hardware_id)
    status.values = [KeyValue(key=k, value=v) for k, v in fields.items()]
    msg = DiagnosticArray(status=[status])
    msg.header.stamp = stamp
    return msg
