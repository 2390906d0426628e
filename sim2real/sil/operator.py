"""The run's operator, a node in the calling process: plays the /cmd_vel or /instruction script on the robot's clock
(the /odom stamps: simulated time in lockstep) and records, per /odom, the command in force and the robot's motion
as the rows `sim2real.sil.scoring` reads."""

from __future__ import annotations

import json
import math

import numpy as np
from geometry_msgs.msg import Twist
from nav_msgs.msg import Odometry
from rclpy.node import Node
from std_msgs.msg import Float64MultiArray, String

from ros_nodes import qos
from sim2real.sil.scripts import Instruction, Segment, command_at

CMD_TIMEOUT_S = 0.5  # policy_node's default cmd_timeout_s: an older /cmd_vel means "stand still"
# instruction_node's ~/plan is latched: a plan published before this subscription matched still comes


class Operator:
    """Subscribes and publishes on `node`; the caller spins it. `samples` holds the recorded rows."""

    def __init__(
        self,
        node: Node,
        segments: list[Segment] | None,
        instructions: list[Instruction] | None,
        dt: float,
        lockstep: bool,
    ):
        self.segments, self.script, self.dt, self.lockstep = segments, list(instructions or []), dt, lockstep
        self.samples: list[list[float]] = []
        self.sent: list[dict] = []  # instructions published: {t_s, text}
        self.plans: list[dict] = []  # instruction_node's ~/plan messages, with the time they came
        self.t0: float | None = None  # the robot's clock at script time zero
        self.seen = False  # a state came in
        self.commanding = False  # a /joint_commands came out of policy_node
        self.started = False  # set once policy_node runs: instructions play from then on
        self._cmd, self._cmd_t = np.zeros(3), -math.inf
        self.pub_cmd = node.create_publisher(Twist, "cmd_vel", qos.COMMAND) if segments else None
        self.pub_instruction = node.create_publisher(String, "instruction", qos.COMMAND)
        node.create_subscription(Odometry, "odom", self._on_odom, qos.SENSOR)
        if not lockstep:
            node.create_subscription(
                Float64MultiArray, "joint_commands", lambda _: setattr(self, "commanding", True), qos.COMMAND
            )
        if instructions:  # the reference is what instruction_node commands
            node.create_subscription(Twist, "cmd_vel", self._on_cmd_vel, qos.COMMAND)
            node.create_subscription(String, "instruction_node/plan", self._on_plan, qos.LATCHED)

    @property
    def t(self) -> float:
        return self.samples[-1][0] if self.samples else 0.0

    def _on_cmd_vel(self, msg: Twist) -> None:
        self._cmd, self._cmd_t = np.array([msg.linear.x, msg.linear.y, msg.angular.z]), self.t

    def _on_plan(self, msg: String) -> None:
        self.plans.append({"t_s": self.t, **json.loads(msg.data)})

    def _on_odom(self, msg: Odometry) -> None:
        stamp = msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9
        self.seen = True
        if self.t0 is None and (self.lockstep or self.commanding):
            # lockstep: time stands still until the policy runs, so zero is the start state; real time: the world
            # runs on while policy_node starts up, and the script starts once it commands the robot
            self.t0 = stamp
        if self.t0 is None:
            return
        t = stamp - self.t0
        if self.samples and t <= self.samples[-1][0]:
            return  # the same state again (a lockstep bridge resends a state nobody answered)
        if self.segments:
            cmd = command_at(self.segments, t)
            # one control period ahead, as a script can be: the command reaches policy_node before its tick at
            # t + dt, so the policy acts on command(t) at t as in the twin (campaigns), not one period late
            twist = Twist()
            twist.linear.x, twist.linear.y, twist.angular.z = (float(v) for v in command_at(self.segments, t + self.dt))
            self.pub_cmd.publish(twist)
        else:
            cmd = self._cmd if t - self._cmd_t <= CMD_TIMEOUT_S else np.zeros(3)
            while self.started and self.script and self.script[0].t_s <= t:
                entry = self.script.pop(0)
                self.pub_instruction.publish(String(data=entry.text))
                self.sent.append({"t_s": round(t, 3), "text": entry.text})
        v, w, p, q = msg.twist.twist.linear, msg.twist.twist.angular, msg.pose.pose.position, msg.pose.pose.orientation
        yaw = math.atan2(2 * (q.w * q.z + q.x * q.y), 1 - 2 * (q.y * q.y + q.z * q.z))
        self.samples.append([t, *cmd, v.x, v.y, w.z, p.z, p.x, p.y, yaw])

    def executed(self) -> list[dict]:
        """Each instruction sent, with the plan instruction_node executed for it (None: preempted before its plan
        was ready, or still generating at the end)."""
        plans = list(self.plans)
        out = []
        for entry in self.sent:
            match = next((p for p in plans if p.get("instruction") == entry["text"][:200]), None)
            if match is not None:
                plans.remove(match)
            out.append(
                {
                    **entry,
                    "plan": match and match["plan"],
                    "valid": match and match["valid"],
                    "warnings": match["warnings"] if match else [],
                    "planned_at_s": round(match["t_s"], 3) if match else None,
                }
            )
        return out
