"""A lifecycle manager's side of a managed node: its change_state and get_state services, called from a node the
caller spins.

Service readiness covers the request path only: under load a reply can be lost while the response path is still
matching. get_state changes nothing, so it is asked again until it answers; a transition whose reply is lost is
judged by the state the node reached (sending it again would be refused as invalid in that state), and sent again
only when the node is still where it was.
"""

from __future__ import annotations

from collections.abc import Callable

from lifecycle_msgs.msg import Transition
from lifecycle_msgs.srv import ChangeState, GetState
from rclpy.node import Node

# spin_until(done, seconds): spin the caller's executor until done() or the time is up; returns done()
SpinUntil = Callable[[Callable[[], bool], float], bool]

GOAL = {  # the state a transition ends in
    Transition.TRANSITION_CONFIGURE: "inactive",
    Transition.TRANSITION_ACTIVATE: "active",
    Transition.TRANSITION_DEACTIVATE: "inactive",
    Transition.TRANSITION_CLEANUP: "unconfigured",
}
# requests carry the transition's label: rclpy looks a label up among the transitions the current state offers and
# answers success=false when it is not one of them (a bare id of an unavailable transition raises in the node)
LABELS = {
    Transition.TRANSITION_CONFIGURE: "configure",
    Transition.TRANSITION_ACTIVATE: "activate",
    Transition.TRANSITION_DEACTIVATE: "deactivate",
    Transition.TRANSITION_CLEANUP: "cleanup",
}
REPLY_S = 5.0  # how long one call waits for its reply
STATE_ATTEMPTS = 5  # get_state calls before a state counts as unknown


class LifecycleClient:
    def __init__(self, node: Node, name: str, spin_until: SpinUntil):
        self.name, self._spin_until = name, spin_until
        self._change = node.create_client(ChangeState, f"/{name}/change_state")
        self._get = node.create_client(GetState, f"/{name}/get_state")

    def ready(self) -> bool:
        """Both services are discovered (the request path; see the module docstring for the replies)."""
        return self._change.service_is_ready() and self._get.service_is_ready()

    def state(self) -> str | None:
        """The node's state label (unconfigured, inactive, active, finalized), None when no reply came."""
        for _ in range(STATE_ATTEMPTS):
            reply = self._call(self._get, GetState.Request())
            if reply is not None:
                return reply.current_state.label
        return None

    def transition(self, transition_id: int) -> bool:
        """True once the node is in the transition's goal state; False when it refused or failed the transition."""
        before = self.state()
        for _ in range(2):
            reply = self._call(
                self._change, ChangeState.Request(transition=Transition(id=transition_id, label=LABELS[transition_id]))
            )
            if reply is not None:
                return reply.success
            now = self.state()
            if now != before:
                return now == GOAL[transition_id]
        return False

    def _call(self, client, request):
        future = client.call_async(request)
        if not self._spin_until(future.done, REPLY_S):
            client.remove_pending_request(future)
            return None
        return future.result()
