"""A managed node that survives a transition request its state does not offer (e.g. activate while unconfigured):
rclpy answers one with an exception out of the change_state service callback, which ends the node's spin. Here it
is refused as a lifecycle manager expects, with `success: false`, and a WARN."""

from __future__ import annotations

from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy
from rclpy.lifecycle import LifecycleNode


def refuse_unavailable_transitions(node: LifecycleNode) -> None:
    change_state = node._service_change_state.callback

    def guarded_change_state(request, response):
        try:
            return change_state(request, response)
        except _rclpy.RCLError:
            t = request.transition
            node.get_logger().warn(
                f"refused lifecycle transition {t.label or t.id!r}: not available from state "
                f"{node._state_machine.current_state[1]!r}"
            )
            response.success = False
            return response

    node._service_change_state.callback = guarded_change_state
