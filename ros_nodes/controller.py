"""policy_node's control step, without ROS: from the latest inputs to joint targets. The observation is assembled
as the manifest lays it out; while the watchdog finds a fault or the e-stop is engaged the targets are the safe
mode's, else the policy's action (through its safety filter) as `offset + scale * action`.

Safe modes (the manifest's control.safe_mode): `hold` commands the default pose at full gains; `damp` commands the
measured joint positions, so a position loop adds no stiffness of its own, and the actuator layer, told `damp` on
the node's safe_mode topic, sets kp = 0 and keeps kd (a moving legged robot sinks instead of snapping to stance)."""

from __future__ import annotations

import numpy as np

from edge.observation import ObservationLayout
from edge.policy import Policy
from ros_nodes.policy_inputs import PolicyInputs, command_limits
from ros_nodes.watchdog import Fault, Watchdog


class PolicyController:
    def __init__(
        self,
        policy: Policy,
        stale_s: float,
        cmd_timeout_s: float,
        cmd_overrides: list[float],
        gyro_bias: np.ndarray | None = None,
    ):
        m = policy.manifest
        self.policy, self.cmd_timeout_s = policy, cmd_timeout_s
        self.joint_names = list(m.joint_names)
        self.layout = ObservationLayout.from_manifest(m.observation["terms"], len(self.joint_names))
        self.scale = m.action_vector("scale").astype(np.float64)
        self.offset = m.action_vector("offset").astype(np.float64)
        self.safe_targets = self.offset + self.scale * policy.safety.safe_action
        self.safe_mode = m.safe_mode
        self.position_controlled = m.control["mode"] == "position"
        self.estop = False  # engaged by ~/estop (topic or service) until released
        self.watchdog = Watchdog(self.layout, stale_s)
        limits = command_limits(m.command_limits, cmd_overrides)
        self.inputs = PolicyInputs(self.joint_names, self.offset, *limits, gyro_bias)
        # the gait clock, for a policy that observes gait_phase: one control period of the manifest per policy step,
        # as the twin counts an episode's steps, whatever rate the node ticks at
        self.clocked = any(t.name == "gait_phase" for t in self.layout.terms)
        self.control_period = m.control_period
        self.reset()

    def reset(self) -> None:
        """Start from the safe pose: the safety filter ramps from it, and it is the last action the policy sees. The
        gait clock starts again at 0, as a twin's episode does from its reset."""
        self.policy.reset()
        self.last_action = self.policy.safety.safe_action.astype(np.float64)
        self.steps = 0  # policy steps since activation or the end of a fault

    @property
    def clock_s(self) -> float | None:
        """The gait clock's time at the next policy step (None: the policy does not observe it)."""
        return self.steps * self.control_period if self.clocked else None

    def step(self, now: float) -> tuple[np.ndarray, Fault | None]:
        """The joint targets at `now` (the clock the inputs' receive times are on), and the fault that made them the
        safe pose (None: the policy's)."""
        stale = self.watchdog.stale(self.inputs.received, now)
        if self.estop:
            fault = Fault("e-stop engaged", stale=False)
        elif stale is not None:
            fault = Fault(stale, stale=True)
        else:
            values = self.inputs.observation_values(now, self.cmd_timeout_s, self.last_action, self.clock_s)
            obs = self.layout.assemble(values)
            invalid = self.watchdog.invalid(obs, values)
            fault = None if invalid is None else Fault(invalid, stale=False)
        if fault is not None:
            self.reset()  # on recovery the safety filter ramps from the safe pose
            return self.safe_output(), fault
        self.last_action = self.policy.act(obs).astype(np.float64)
        self.steps += 1
        return self.offset + self.scale * self.last_action, None

    def safe_output(self) -> np.ndarray:
        """The safe mode's joint targets: the default pose (hold), or the measured positions (damp) while they are
        known and finite (else the default pose)."""
        measured = self.inputs.values.get("joint_pos")
        if (
            self.safe_mode == "damp"
            and self.position_controlled
            and measured is not None
            and np.all(np.isfinite(measured))
        ):
            return self.inputs.default_pose + measured
        return self.safe_targets
