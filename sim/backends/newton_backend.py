"""Newton backend: the robot's MJCF imported into Newton (`ModelBuilder.add_mjcf`), one Newton world per env,
stepped by Newton's Featherstone solver (reduced coordinates, penalty contacts) on Warp: on the CPU here, on a
CUDA GPU where there is one. A physics engine independent of MuJoCo's, for sim-to-sim checks of an artifact.

The actuators are the robot YAML's PD law (sim.robot.set_pd_gains) evaluated by a Warp kernel before every
solver substep and applied as joint torques, clipped to the torque limit: Newton's built-in joint drives have
no effort limit in Featherstone, and evaluating the same law keeps the actuator identical across backends.

Needs `pip install newton==1.8.0 warp-lang==1.19.0`. The first run compiles Warp kernels (about two minutes on
a CPU, cached in ~/.cache/warp); Warp's CPU kernels run on one thread.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim.backends.base import MODEL_ONLY_PARAMS, TwinBackend
from sim.errors import SimError
from sim.randomization import PhysicsParams
from sim.robot import RobotSpec, build_model, scaled_gains

INSTALL_HINT = "the newton backend needs `pip install newton==1.8.0 warp-lang==1.19.0`"


@dataclass(frozen=True)
class NewtonConfig:
    """Solver settings. Penalty contacts at MuJoCo's 5 ms step need substeps and stiff contacts to stay stable;
    these values keep the rover's wheel speed and ride height within a few percent of MuJoCo's."""

    substeps: int = 4  # Featherstone steps per physics step (sim_dt / substeps each)
    contact_ke: float = 3.0e4  # contact normal stiffness (N/m)
    contact_kd: float = 200.0  # contact normal damping (N s/m); 1e3 makes the light feet of a quadruped chatter
    contact_kf: float = 1.0e4  # friction slope below the Coulomb limit (N s/m)
    device: str | None = None  # None: CUDA when Warp sees a GPU, else CPU


def _import_newton():
    try:
        import warp as wp

        wp.config.log_level = wp.LOG_ERROR  # before Warp initialises: no banner from every worker
        wp.config.enable_backward = False  # the twin never differentiates: compile forward kernels only
        import newton
    except ImportError as e:
        raise ImportError(f"{INSTALL_HINT} ({e})") from None
    return newton, wp


def _quat_rotate(q_wxyz: np.ndarray, v: np.ndarray) -> np.ndarray:
    """R(q) v for batches of unit quaternions (w, x, y, z)."""
    w, u = q_wxyz[:, :1], q_wxyz[:, 1:]
    t = 2.0 * np.cross(u, v)
    return v + w * t + np.cross(u, t)


def _quat_rotate_inv(q_wxyz: np.ndarray, v: np.ndarray) -> np.ndarray:
    conj = q_wxyz * np.array([1.0, -1.0, -1.0, -1.0])
    return _quat_rotate(conj, v)


class NewtonBackend(TwinBackend):
    def __init__(self, spec: RobotSpec, num_envs: int, nthread: int | None = None, config: NewtonConfig | None = None):
        """`nthread` is accepted for the interface and ignored: Warp runs its own parallelism."""
        newton, wp = _import_newton()
        self.spec, self.num_envs, self.cfg = spec, num_envs, config or NewtonConfig()
        self._newton, self._wp = newton, wp
        self.device = self.cfg.device or str(wp.get_preferred_device())
        mj = build_model(spec)  # names and per-geom facts the MJCF importer does not carry over

        robot = newton.ModelBuilder()
        shape = robot.default_shape_cfg
        shape.ke, shape.kd, shape.kf = self.cfg.contact_ke, self.cfg.contact_kd, self.cfg.contact_kf
        world_geoms = [mj.geom(i).name for i in range(mj.ngeom) if mj.geom_bodyid[i] == 0 and mj.geom(i).name]
        robot.add_mjcf(
            str(spec.mjcf), ignore_names=[f"^{g}$" for g in world_geoms], parse_sites=False, parse_visuals=False
        )
        # the ground lives in each world, so that each env's friction can differ
        robot.add_ground_plane()
        # MuJoCo's condim 1 is a frictionless contact (the rover's casters); Newton knows only friction coefficients
        frictionless = {mj.geom(i).name for i in range(mj.ngeom) if mj.geom_condim[i] == 1 and mj.geom(i).name}
        self._frictionless = np.array([lbl.rsplit("/", 1)[-1] in frictionless for lbl in robot.shape_label])
        for i in np.flatnonzero(self._frictionless):
            robot.shape_material_mu[i] = 0.0
        labels = [lbl.rsplit("/", 1)[-1] for lbl in robot.joint_label]
        missing = [j for j in spec.joints if j not in labels]
        if missing:
            raise SimError(f"newton backend: joints {', '.join(missing)} not found in the imported MJCF")
        q_start, qd_start = robot.joint_q_start, robot.joint_qd_start
        self._joint_q = np.array([q_start[labels.index(j)] for j in spec.joints])
        self._joint_qd = np.array([qd_start[labels.index(j)] for j in spec.joints])
        base = [lbl.rsplit("/", 1)[-1] for lbl in robot.body_label].index(spec.base_body)
        base_joint = robot.joint_child.index(base)  # the free joint (build_model checked there is one)
        self._base_body, self._base_q, self._base_qd = base, q_start[base_joint], qd_start[base_joint]
        self._ncoord, self._ndof = robot.joint_coord_count, robot.joint_dof_count
        self._com = np.asarray(robot.body_com[base], dtype=np.float64)

        builder = newton.ModelBuilder()
        builder.replicate(robot, num_envs)
        self.model = builder.finalize(device=self.device)
        self.solver = newton.solvers.SolverFeatherstone(self.model)
        self._state, self._next = self.model.state(), self.model.state()
        self.control = self.model.control()
        self.collision = newton.CollisionPipeline(self.model)
        self.contacts = self.collision.contacts()
        self._q0 = self.model.joint_q.numpy().reshape(num_envs, self._ncoord)[0].copy()
        self._mass0 = float(self.model.body_mass.numpy()[base])
        self._inertia0 = self.model.body_inertia.numpy()[base].copy()
        offsets = (np.arange(num_envs) * self._ncoord)[:, None]
        dof_offsets = (np.arange(num_envs) * self._ndof)[:, None]
        from sim.backends.newton_kernels import Actuators, pd_torques  # after _import_newton set Warp's options

        kp, kd = scaled_gains(spec, np.ones(num_envs), np.ones(num_envs))
        self._gains = {
            "kp": kp.astype(np.float32),
            "kd": kd.astype(np.float32),
            "strength": np.ones(num_envs, np.float32),
        }
        self._gains_wp = {k: wp.array(v, dtype=wp.float32, device=self.device) for k, v in self._gains.items()}
        self._actuators = Actuators()  # holds the gain arrays: set_params assigns into them, the kernel sees it
        self._actuators.q_index = wp.array(
            (offsets + self._joint_q).astype(np.int32), dtype=wp.int32, device=self.device
        )
        self._actuators.qd_index = wp.array(
            (dof_offsets + self._joint_qd).astype(np.int32), dtype=wp.int32, device=self.device
        )
        self._actuators.mode = {"position": 0, "velocity": 1, "torque": 2}[spec.control_mode]
        self._actuators.kp, self._actuators.kd = self._gains_wp["kp"], self._gains_wp["kd"]
        self._actuators.strength = self._gains_wp["strength"]
        self._actuators.limit = wp.array(
            np.asarray(spec.torque_limit, np.float32), dtype=wp.float32, device=self.device
        )
        self._kernel = pd_torques
        newton.eval_fk(self.model, self._state.joint_q, self._state.joint_qd, self._state)

    # ------------------------------------------------------------------ stepping
    def step(self, targets: np.ndarray) -> None:
        wp, n, nu = self._wp, self.num_envs, self.spec.num_actions
        nstep = targets.shape[1]
        device_targets = wp.array(np.ascontiguousarray(targets, dtype=np.float32), dtype=wp.float32, device=self.device)
        dt = self.spec.physics_dt / self.cfg.substeps
        for k in range(nstep):
            for _ in range(self.cfg.substeps):
                self.control.joint_f.zero_()
                wp.launch(
                    self._kernel,
                    dim=(n, nu),
                    inputs=[self._state.joint_q, self._state.joint_qd, device_targets, k, self._actuators],
                    outputs=[self.control.joint_f],
                    device=self.device,
                )
                self._state.clear_forces()
                self.collision.collide(self._state, self.contacts)
                self.solver.step(self._state, self._next, self.control, self.contacts, dt)
                self._state, self._next = self._next, self._state

    # ------------------------------------------------------------------ state
    def _arrays(self) -> tuple[np.ndarray, np.ndarray]:
        q = self._state.joint_q.numpy().reshape(self.num_envs, self._ncoord).astype(np.float64)
        qd = self._state.joint_qd.numpy().reshape(self.num_envs, self._ndof).astype(np.float64)
        return q, qd

    def state(self) -> dict[str, np.ndarray]:
        q, qd = self._arrays()
        b, v = self._base_q, self._base_qd
        quat = q[:, [b + 6, b + 3, b + 4, b + 5]]  # Newton stores (x, y, z, w)
        omega_world = qd[:, v + 3 : v + 6]
        # Newton's free-joint linear velocity is the COM's; the twin's convention is the base origin's (MuJoCo's)
        com_offset = _quat_rotate(quat, np.broadcast_to(self._com, (self.num_envs, 3)))
        return {
            "base_pos": q[:, b : b + 3],
            "base_quat": quat,
            "base_lin_vel": qd[:, v : v + 3] - np.cross(omega_world, com_offset),
            "base_ang_vel": _quat_rotate_inv(quat, omega_world),
            "joint_pos": q[:, self._joint_q],
            "joint_vel": qd[:, self._joint_qd],
        }

    def _write(self, q: np.ndarray, qd: np.ndarray) -> None:
        wp = self._wp
        self._state.joint_q.assign(wp.array(q.astype(np.float32).ravel(), dtype=wp.float32, device=self.device))
        self._state.joint_qd.assign(wp.array(qd.astype(np.float32).ravel(), dtype=wp.float32, device=self.device))
        self._newton.eval_fk(self.model, self._state.joint_q, self._state.joint_qd, self._state)

    def reset(self, env_ids: np.ndarray) -> None:
        q, qd = self._arrays()
        q[env_ids] = self._q0
        qd[env_ids] = 0.0
        self._write(q, qd)

    def set_state(self, env_ids, base_pos, base_quat, base_lin_vel, base_ang_vel, joint_pos, joint_vel) -> None:
        q, qd = self._arrays()
        b, v = self._base_q, self._base_qd
        quat = np.asarray(base_quat, dtype=np.float64)
        omega_world = _quat_rotate(quat, np.asarray(base_ang_vel, dtype=np.float64))
        com_offset = _quat_rotate(quat, np.broadcast_to(self._com, (len(env_ids), 3)))
        q[np.ix_(env_ids, np.arange(b, b + 3))] = base_pos
        q[np.ix_(env_ids, np.arange(b + 3, b + 7))] = quat[:, [1, 2, 3, 0]]
        q[np.ix_(env_ids, self._joint_q)] = joint_pos
        qd[np.ix_(env_ids, np.arange(v, v + 3))] = np.asarray(base_lin_vel) + np.cross(omega_world, com_offset)
        qd[np.ix_(env_ids, np.arange(v + 3, v + 6))] = omega_world
        qd[np.ix_(env_ids, self._joint_qd)] = joint_vel
        self._write(q, qd)

    def set_params(self, env_ids: np.ndarray, params: PhysicsParams) -> None:
        self.refuse_params(params, MODEL_ONLY_PARAMS)
        wp, newton = self._wp, self._newton
        mu = self.model.shape_material_mu.numpy().reshape(self.num_envs, -1)
        mu[env_ids] = np.where(self._frictionless, 0.0, np.asarray(params.friction)[:, None])
        self.model.shape_material_mu.assign(
            wp.array(mu.ravel().astype(np.float32), dtype=wp.float32, device=self.device)
        )
        bodies = np.asarray(env_ids) * (self.model.body_count // self.num_envs) + self._base_body
        mass = np.maximum(self._mass0 + np.asarray(params.payload_kg), 0.1 * self._mass0)
        for name, values in (
            ("body_mass", mass),
            ("body_inv_mass", 1.0 / mass),
            ("body_inertia", self._inertia0[None] * (mass / self._mass0)[:, None, None]),
            ("body_inv_inertia", np.linalg.inv(self._inertia0)[None] * (self._mass0 / mass)[:, None, None]),
        ):
            arr = getattr(self.model, name)
            host = arr.numpy()
            host[bodies] = values
            arr.assign(wp.array(host, dtype=arr.dtype, device=self.device))
        self._gains["kp"][env_ids], self._gains["kd"][env_ids] = scaled_gains(
            self.spec, params.kp_scale, params.kd_scale
        )
        self._gains["strength"][env_ids] = params.motor_strength
        for k, v in self._gains.items():
            self._gains_wp[k].assign(wp.array(v, dtype=wp.float32, device=self.device))
        self.solver.notify_model_changed(
            newton.ModelFlags.SHAPE_PROPERTIES | newton.ModelFlags.BODY_INERTIAL_PROPERTIES
        )
