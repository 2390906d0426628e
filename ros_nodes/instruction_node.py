"""instruction_node: natural-language instructions in, velocity commands out.

Subscribes to /instruction (std_msgs/String), turns each one into a command plan with the exported instruction model
on ONNX Runtime (edge.instruct: screen -> model -> parse -> clamp to the policy artifact's command limits and a
maximum duration) and publishes the plan on /cmd_vel (geometry_msgs/Twist) segment by segment at `rate_hz`, then a
zero command. A new instruction preempts the running plan at once (zero command while the new plan is generated);
"stop" and its synonyms are handled without the model. One instruction waits at most: a newer one replaces it (the
newest wins under a flood), and the count of instructions dropped so is logged and sent with each plan. The model
and the policy artifact must be signed by a trusted key (edge.signing) unless allow_unsigned (development only).
The executed plan and its warnings go to ~/plan (std_msgs/String, JSON, latched). The robot state in the prompt is
the measured base velocity from /odom. The model runs in a worker thread so the node keeps publishing and hears
"stop" while it generates. Plan timing uses the node's clock, so with use_sim_time (ROS /clock, as in the lockstep
software-in-the-loop run) segments last simulated seconds. A robot process: no torch, transformers, MuJoCo, sim or
training here (.importlinter holds it).
"""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path

from geometry_msgs.msg import Twist
from nav_msgs.msg import Odometry
from rclpy.node import Node
from std_msgs.msg import String

from edge.fileio import atomic_write_bytes
from edge.instruct.onnx_generator import OnnxGenerator, providers_for
from edge.instruct.plan import STOP, Plan, plan_to_dicts
from edge.instruct.planner import InstructionPlanner, Planned
from edge.instruct.prompt import state_summary
from edge.instruct.safety import is_stop, limits_from_manifest, screen_instruction
from edge.signing import require_signed, trusted_key_paths
from ros_nodes import qos
from ros_nodes.checks import log_check
from ros_nodes.instruction_params import InstructionParams
from ros_nodes.params import declare, read
from ros_nodes.spin import init, spin, start


class InstructionNode(Node):
    def __init__(self, **kwargs):
        super().__init__("instruction_node", **kwargs)
        declare(self, InstructionParams)
        p = read(self, InstructionParams)  # a backend outside its choices, a missing model or artifact: one line
        keys = trusted_key_paths(p.trusted_keys)
        for directory in (p.model, p.artifact):  # the artifact's limits clamp every plan: it is trusted only signed too
            log_check(self.get_logger(), require_signed(directory, keys, p.allow_unsigned), about=str(directory))
        self.limits = limits_from_manifest(p.artifact, p.max_duration_s)
        generator = OnnxGenerator(p.model, providers_for(p.backend), threads=p.threads)
        self.planner = InstructionPlanner(generator, self.limits, constrained=p.constrained)
        self._modules_file = p.modules_file
        self._lock = threading.Lock()
        self._seq = 0  # the latest instruction; a finished generation for an older one is dropped
        self._inbox: tuple[int, str, str] | None = None  # the one instruction waiting for the model (seq, text, state)
        self._wake = threading.Event()
        self._closing = False
        self.dropped = 0  # instructions superseded before their plan started (waiting, or generated too late)
        self._reported_dropped = 0
        self._pending: Planned | None = None
        self._plan: Plan | None = None
        self._plan_start = 0.0
        self._state = state_summary()
        self.pub_cmd = self.create_publisher(Twist, "cmd_vel", qos.COMMAND)
        self.pub_plan = self.create_publisher(
            String,
            "~/plan",
            qos.LATCHED,
        )
        self.create_subscription(String, "instruction", self._on_instruction, qos.COMMAND)
        self.create_subscription(Odometry, "odom", self._on_odom, qos.SENSOR)
        self.create_timer(1.0 / p.rate_hz, self._tick)
        self._worker = threading.Thread(target=self._work, name="instruction_model", daemon=True)
        self._worker.start()
        self.get_logger().info(
            f"ready: {p.model} on {', '.join(generator.providers)}; limits from {p.artifact}: vx {self.limits.vx}, "
            f"vy {self.limits.vy}, wz {self.limits.wz}, max {self.limits.max_duration_s:g} s"
        )

    def _on_odom(self, msg: Odometry) -> None:
        self._state = state_summary(msg.twist.twist.linear.x, msg.twist.twist.angular.z)

    def _on_instruction(self, msg: String) -> None:
        clean, warnings = screen_instruction(msg.data, self.limits)
        stop = not clean or is_stop(clean)
        with self._lock:
            self._seq += 1
            # a plan still waiting for the model, or generated and not yet started: the newer instruction replaces it
            self.dropped += (self._inbox is not None) + (self._pending is not None)
            self._plan, self._pending = None, None
            self._inbox = None if stop else (self._seq, msg.data, self._state)
            if not stop:
                self._wake.set()
        self._publish(0.0, 0.0, 0.0)  # preempt: the old plan stops now, not when the new one is ready
        if stop:
            self._start(Planned(msg.data, clean, "", True, STOP, warnings))

    def _work(self) -> None:
        """The model's thread: plans the newest waiting instruction, one at a time."""
        while True:
            self._wake.wait()
            with self._lock:
                if self._closing:
                    return
                item, self._inbox = self._inbox, None
                self._wake.clear()
            if item is None:
                continue
            seq, text, state = item
            try:
                planned = self.planner.plan(text, state)
            except Exception as e:  # noqa: BLE001 - a model failure must stop the robot, not kill the node
                planned = Planned(text, "", "", False, STOP, [f"model failed ({e.__class__.__name__}: {e}): stopping"])
            with self._lock:
                if seq == self._seq:
                    self._pending = planned
                else:
                    self.dropped += 1

    def _start(self, planned: Planned) -> None:
        for w in planned.warnings:
            self.get_logger().warn(f"{w} [instruction {planned.instruction[:60]!r}]")
        total = sum(s.duration_s for s in planned.plan)
        self.get_logger().info(f"plan for {planned.screened[:60]!r}: {len(planned.plan)} segment(s), {total:.2f} s")
        with self._lock:
            dropped, newly = self.dropped, self.dropped - self._reported_dropped
            self._reported_dropped = dropped
        if newly:
            self.get_logger().warn(f"{newly} superseded instruction(s) dropped (newest wins; {dropped} in all)")
        self.pub_plan.publish(
            String(
                data=json.dumps(
                    {
                        "instruction": planned.instruction[:200],
                        "plan": plan_to_dicts(planned.plan),
                        "valid": planned.valid,
                        "warnings": planned.warnings,
                        "instructions_dropped": dropped,
                    }
                )
            )
        )
        with self._lock:
            self._plan, self._plan_start = planned.plan, self._now()

    def _tick(self) -> None:
        with self._lock:
            pending, self._pending = self._pending, None
            if pending is not None and self._now() == 0.0:  # use_sim_time before the first /clock: no time yet
                self._pending, pending = pending, None
        if pending is not None:
            self._start(pending)
        with self._lock:
            plan, start = self._plan, self._plan_start
        if plan is None:
            return
        elapsed, end = self._now() - start, 0.0
        for seg in plan:
            end += seg.duration_s
            if elapsed < end:
                self._publish(seg.vx, seg.vy, seg.wz)
                return
        self._publish(0.0, 0.0, 0.0)
        with self._lock:
            if self._plan is plan:
                self._plan = None

    def _now(self) -> float:
        """Seconds on the node's clock: ROS time (/clock) under use_sim_time, else the system clock."""
        return self.get_clock().now().nanoseconds * 1e-9

    def _publish(self, vx: float, vy: float, wz: float) -> None:
        msg = Twist()
        msg.linear.x, msg.linear.y, msg.angular.z = float(vx), float(vy), float(wz)
        self.pub_cmd.publish(msg)

    def destroy_node(self) -> None:
        with self._lock:
            self._closing = True
            self._wake.set()
        if self.context.ok():  # after SIGINT the context is already shut down and nothing can be sent
            self._publish(0.0, 0.0, 0.0)
        if self._modules_file:  # at exit, so whatever the process imported while it ran is in
            atomic_write_bytes(Path(self._modules_file), json.dumps(sorted(sys.modules)).encode())
        super().destroy_node()


def main(args: list[str] | None = None) -> None:
    init(args)
    node = start("instruction_node", InstructionNode)  # a bad parameter, model or artifact: one line, exit 2
    spin(node)


if __name__ == "__main__":
    main()
