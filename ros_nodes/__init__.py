"""rclpy nodes: thin adapters from ROS topics to `edge` and `sim` objects."""
