"""The QoS of every topic, chosen on purpose (docs/ros.md lists them per topic).

- SENSOR: best effort, keep last 5 (rclpy's sensor-data profile): a late sample is worth less than the next one,
  and a lost one is replaced within a period. /joint_states, /imu/data, /odom.
- COMMAND: reliable, keep last 1: only the newest command matters; after a stall nothing old queues behind it.
  cmd_vel, joint_commands, joint_trajectory, instruction.
- LATCHED: reliable, transient local, keep last 1: a late joiner gets the last value (a plan, an e-stop state).
- STATUS: reliable, keep last 10: diagnostics, read by people and aggregators.
"""

from __future__ import annotations

from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy, qos_profile_sensor_data

SENSOR = qos_profile_sensor_data
COMMAND = QoSProfile(depth=1, history=HistoryPolicy.KEEP_LAST, reliability=ReliabilityPolicy.RELIABLE)
LATCHED = QoSProfile(
    depth=1,
    history=HistoryPolicy.KEEP_LAST,
    reliability=ReliabilityPolicy.RELIABLE,
    durability=DurabilityPolicy.TRANSIENT_LOCAL,
)
STATUS = QoSProfile(depth=10, history=HistoryPolicy.KEEP_LAST, reliability=ReliabilityPolicy.RELIABLE)
