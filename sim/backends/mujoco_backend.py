"""MuJoCo backend: one MjModel per env (so each env can carry its own randomised physics), stepped together
by MuJoCo's multi-threaded `rollout` on flat state arrays; no Python loop over envs on the hot path.

Feet (TwinBackend.feet) come from sensors added per foot geom: a contact sensor against the world body (net force,
world frame), the geom's position and linear velocity. rollout records the sensordata of each mj_step, which MuJoCo
evaluates before integrating: the feet are one physics step (sim_dt) behind the state after a step."""

from __future__ import annotations

import copy
import os

import mujoco
import numpy as np
from mujoco import rollout

from sim.backends.base import TwinBackend
from sim.randomization import PhysicsParams
from sim.robot import RobotSpec, build_model, scaled_gains, set_pd_gains
from sim.terrain import TerrainGrid
from sim.terrain.mjspec import add_terrain, set_heights

_FULL = mujoco.mjtState.mjSTATE_FULLPHYSICS.value
_CTRL = mujoco.mjtState.mjSTATE_CTRL.value
# envs per thread-pool job; None keeps rollout's default, max(1, num_envs / (10 * nthread))
ROLLOUT_CHUNK: int | None = None
# the contact sensor's data fields and reduction (MuJoCo's sensor/contact: intprm = data bits, reduce, num)
_FIELD = mujoco.mjtConDataField
_CONTACT_DATA = (1 << _FIELD.mjCONDATA_FOUND.value) | (1 << _FIELD.mjCONDATA_FORCE.value)
_REDUCE_NETFORCE = 3


def _add_foot_sensors(mj: mujoco.MjSpec, feet: tuple[str, ...]) -> None:
    """Per foot geom: <foot>_contact (found, net force against the world body's geoms), <foot>_pos, <foot>_vel."""
    for foot in feet:
        contact = mj.add_sensor(name=f"{foot}_contact", type=mujoco.mjtSensor.mjSENS_CONTACT)
        contact.objtype, contact.objname = mujoco.mjtObj.mjOBJ_GEOM, foot
        contact.reftype, contact.refname = mujoco.mjtObj.mjOBJ_BODY, "world"
        contact.intprm[:3] = [_CONTACT_DATA, _REDUCE_NETFORCE, 1]
        for suffix, kind in (("pos", mujoco.mjtSensor.mjSENS_FRAMEPOS), ("vel", mujoco.mjtSensor.mjSENS_FRAMELINVEL)):
            sensor = mj.add_sensor(name=f"{foot}_{suffix}", type=kind)
            sensor.objtype, sensor.objname = mujoco.mjtObj.mjOBJ_GEOM, foot


def _drop_visual_meshes(mj: mujoco.MjSpec) -> bool:
    """Delete the mesh geoms that never collide (contype = conaffinity = 0: a Menagerie robot's visual class) and the
    meshes no geom uses any more; True if any went. Each env holds a copy of the model, and Menagerie's Go1 with its
    meshes is 37 MB (51 kB without): 1024 envs ran out of 24 GB."""
    mesh = mujoco.mjtGeom.mjGEOM_MESH
    visual = [g for g in mj.geoms if g.type == mesh and g.contype == 0 and g.conaffinity == 0]
    for geom in visual:
        mj.delete(geom)
    used = {g.meshname for g in mj.geoms if g.type == mesh}
    for m in [m for m in mj.meshes if m.name not in used]:
        mj.delete(m)
    return bool(visual)


def _same_inertia(a: mujoco.MjModel, b: mujoco.MjModel) -> bool:
    fields = ("body_mass", "body_inertia", "body_ipos", "body_iquat")
    return all(np.allclose(getattr(a, f), getattr(b, f), rtol=0, atol=1e-12) for f in fields)


def physics_model(spec: RobotSpec, edit) -> mujoco.MjModel:
    """The robot compiled for stepping: without its visual-only meshes where that leaves every body's mass and
    inertia as it was (a geom with a density adds to its body's inertia even when it never collides)."""
    dropped = False

    def lean_edit(mj: mujoco.MjSpec) -> None:
        nonlocal dropped
        edit(mj)
        dropped = _drop_visual_meshes(mj)

    lean = build_model(spec, lean_edit)
    if not dropped:
        return lean
    full = build_model(spec, edit)
    return lean if _same_inertia(full, lean) else full


class MujocoBackend(TwinBackend):
    def __init__(self, spec: RobotSpec, num_envs: int, nthread: int | None = None, terrain: TerrainGrid | None = None):
        self.spec = spec
        self.num_envs = num_envs
        self.terrain = terrain

        def edit(mj: mujoco.MjSpec) -> None:
            if terrain is not None:
                add_terrain(mj, terrain)  # the world's planes become one heightfield
            _add_foot_sensors(mj, spec.feet)  # contact against the world body: floor or terrain alike

        self.base_model = physics_model(spec, edit)
        self.models = [copy.copy(self.base_model) for _ in range(num_envs)]
        m = self.base_model
        nthread = min(os.cpu_count() or 1, num_envs) if nthread is None else nthread
        # a pool of one thread only adds hand-offs: run small batches on the calling thread
        self._pool = rollout.Rollout(nthread=nthread if nthread > 1 else 0)
        self._datas = [mujoco.MjData(m) for _ in range(max(nthread, 1))]
        self.nstate = mujoco.mj_stateSize(m, _FULL)
        self._state = np.zeros((num_envs, self.nstate))
        data = mujoco.MjData(m)
        mujoco.mj_getState(m, data, self._state[0], _FULL)
        self._state0 = self._state[0].copy()
        self._state[:] = self._state0
        # state layout: [time, qpos, qvel, ...]
        self._qpos = slice(1, 1 + m.nq)
        self._qvel = slice(1 + m.nq, 1 + m.nq + m.nv)
        base = m.body(spec.base_body).id
        self._base_id = base
        free = m.body_jntadr[base]
        self._base_q = int(m.jnt_qposadr[free])
        self._base_v = int(m.jnt_dofadr[free])
        self._joint_q = np.array([m.joint(j).qposadr[0] for j in spec.joints])
        self._joint_v = np.array([m.joint(j).dofadr[0] for j in spec.joints])
        self._mass0 = float(m.body_mass[base])
        self._inertia0 = m.body_inertia[base].copy()
        self._out: np.ndarray | None = None  # [N, nstep, nstate] and [N, nstep, nsensordata], sized at the first step
        self._sensordata: np.ndarray | None = None
        adr = {name: int(m.sensor_adr[m.sensor(name).id]) for name in (m.sensor(i).name for i in range(m.nsensor))}
        self._force_cols = np.array([[adr[f"{f}_contact"] + 1 + k for k in range(3)] for f in spec.feet], int)
        self._pos_cols = np.array([[adr[f"{f}_pos"] + k for k in range(3)] for f in spec.feet], int)
        self._vel_cols = np.array([[adr[f"{f}_vel"] + k for k in range(3)] for f in spec.feet], int)
        self._sensors = np.zeros((num_envs, m.nsensordata))  # at the last physics step
        self._sensors_fresh = np.zeros(num_envs, bool)  # False: the state was set since; feet() recomputes

    def step(self, targets: np.ndarray) -> None:
        nstep = targets.shape[1]
        out, sensordata = self._out, self._sensordata
        if out is None or sensordata is None or out.shape[1] != nstep:
            out = self._out = np.empty((self.num_envs, nstep, self.nstate))
            sensordata = self._sensordata = np.empty((self.num_envs, nstep, self.base_model.nsensordata))
        control = np.ascontiguousarray(targets, dtype=np.float64)
        self._pool.rollout(
            self.models,
            self._datas,
            self._state,
            control,
            control_spec=_CTRL,
            skip_checks=True,
            nstep=nstep,
            state=out,
            sensordata=sensordata,
            chunk_size=ROLLOUT_CHUNK,
        )
        self._state[:] = out[:, -1]
        self._sensors[:] = sensordata[:, -1]
        self._sensors_fresh[:] = True

    def reset(self, env_ids: np.ndarray) -> None:
        self._state[env_ids] = self._state0
        self._sensors_fresh[env_ids] = False

    def set_state(self, env_ids, base_pos, base_quat, base_lin_vel, base_ang_vel, joint_pos, joint_vel) -> None:
        s = self._state
        q, v = self._base_q, self._base_v
        qpos_cols = 1 + np.concatenate([np.arange(q, q + 7), self._joint_q])
        qvel_cols = 1 + self.base_model.nq + np.concatenate([np.arange(v, v + 6), self._joint_v])
        s[np.ix_(env_ids, qpos_cols)] = np.concatenate([base_pos, base_quat, joint_pos], axis=1)
        s[np.ix_(env_ids, qvel_cols)] = np.concatenate([base_lin_vel, base_ang_vel, joint_vel], axis=1)
        s[env_ids, 0] = 0.0  # time
        self._sensors_fresh[env_ids] = False

    def set_params(self, env_ids: np.ndarray, params: PhysicsParams) -> None:
        spec, nu = self.spec, self.spec.num_actions
        kp, kd = scaled_gains(spec, params.kp_scale, params.kd_scale)
        for k, i in enumerate(env_ids):
            m = self.models[i]
            m.geom_friction[:, 0] = params.friction[k]
            mass = max(self._mass0 + params.payload_kg[k], 0.1 * self._mass0)
            m.body_mass[self._base_id] = mass
            m.body_inertia[self._base_id] = self._inertia0 * (mass / self._mass0)
            set_pd_gains(m, spec, kp[k], kd[k], np.full(nu, params.motor_strength[k]))

    def set_terrain(self, env_ids: np.ndarray, heights: np.ndarray) -> None:
        assert self.terrain is not None, "the twin sets terrain heights only on a backend built with terrain"
        for i, cell in zip(env_ids, heights, strict=True):
            set_heights(self.models[i], self.terrain, cell)

    def state(self) -> dict[str, np.ndarray]:
        # copies, not views: the next step overwrites self._state in place, and callers keep these arrays
        qpos = self._state[:, self._qpos]
        qvel = self._state[:, self._qvel]
        q, v = self._base_q, self._base_v
        return {
            "base_pos": qpos[:, q : q + 3].copy(),
            "base_quat": qpos[:, q + 3 : q + 7].copy(),
            "base_lin_vel": qvel[:, v : v + 3].copy(),  # free joint: world frame
            "base_ang_vel": qvel[:, v + 3 : v + 6].copy(),  # free joint: body frame
            "joint_pos": qpos[:, self._joint_q],
            "joint_vel": qvel[:, self._joint_v],
        }

    def raw_state(self) -> np.ndarray:
        return self._state.copy()

    def load_raw_state(self, state: np.ndarray) -> None:
        if np.shape(state) != self._state.shape:
            raise ValueError(f"physics state of shape {np.shape(state)}, this model needs {self._state.shape}")
        self._state[:] = state
        self._sensors_fresh[:] = False

    def feet(self) -> dict[str, np.ndarray]:
        for i in np.flatnonzero(~self._sensors_fresh):  # only envs set since the last step (resets, pushes)
            self._sensors[i] = self.mjdata(i).sensordata
        self._sensors_fresh[:] = True
        s = self._sensors
        return {
            "contact_force": np.linalg.norm(s[:, self._force_cols], axis=-1),
            "pos": s[:, self._pos_cols],
            "vel": s[:, self._vel_cols],
        }

    def mjdata(self, env_id: int) -> mujoco.MjData:
        """A fresh MjData holding env `env_id`'s current state (for viewers, debugging and benchmarks)."""
        data = mujoco.MjData(self.models[env_id])
        mujoco.mj_setState(self.models[env_id], data, self._state[env_id], _FULL)
        mujoco.mj_forward(self.models[env_id], data)
        return data

    def close(self) -> None:
        self._pool.close()
