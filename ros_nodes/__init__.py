"""rclpy adapters only: each node is a thin adapter from ROS topics to `edge` (robot side) and `sim` (the twin
that plays the robot) objects. The robot runs policy_node, instruction_node and field_recorder."""

__all__ = ["field_recorder", "instruction_node", "policy_node", "sim_bridge_node"]
