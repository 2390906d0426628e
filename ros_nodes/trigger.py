"""policy_node's `trigger: joint_states`: one tick per /joint_states instant, taken once every input the policy
reads describes that instant (or a later one), and ticks on silence when the driver stops. Pure Python, so the
stamp logic is unit-tested without DDS.

Ticking on /joint_states alone would often read the previous /imu/data and /odom, because the executor serves
subscriptions in its own order: a one-period delay the policy never saw in training. A state sent again with the
same stamp (a lockstep bridge does when no command answered it) gets no second tick, which the bridge would take as
the answer to its next state.
"""

from __future__ import annotations


class InstantTrigger:
    def __init__(self, needed: list[str], stale_s: float):
        self.needed, self.stale_s = needed, stale_s
        self.ticked_ns = 0  # the stamp of the last instant ticked on
        self.reset()

    def reset(self) -> None:
        self.due_ns: int | None = None  # the stamp of the /joint_states awaiting its tick
        self.last_tick_clock_ns: int | None = None  # the node's clock at the last tick: the silence reference

    def state_arrived(self, stamp_ns: int) -> None:
        """A /joint_states stamped `stamp_ns` came (0: a driver without stamps, every message an instant)."""
        if stamp_ns == 0 or stamp_ns != self.ticked_ns:
            self.due_ns = stamp_ns

    def ready(self, header_ns: dict[str, int]) -> bool:
        """True (once per instant) when the inputs' stamps (input -> header stamp) all reach the due instant."""
        if self.due_ns is None or not all(header_ns.get(s, -1) >= self.due_ns for s in self.needed):
            return False
        self.ticked_ns, self.due_ns = self.due_ns, None
        return True

    def ticked(self, clock_ns: int) -> None:
        """A tick ran at the node's clock `clock_ns`. The instant ticked on counts when it is later: the clock
        message announcing it may not have been served yet."""
        self.last_tick_clock_ns = max(clock_ns, self.ticked_ns)

    def silence(self, clock_ns: int) -> bool:
        """True when no tick came for longer than the stale time (the driver fell silent): tick on the timer then.
        On the node's clock: under /clock (lockstep) a slow wall-clock step is not silence, and an extra tick there
        would make the bridge take an extra step on an old command."""
        if self.last_tick_clock_ns is not None and clock_ns - self.last_tick_clock_ns <= self.stale_s * 1e9:
            return False
        self.due_ns = None
        return True
