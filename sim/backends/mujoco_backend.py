"""MuJoCo backend: the envs are the simulations of one `mujoco.batch.Batch`, stepped together on its thread pool
with no Python loop over envs on the hot path. Each env's randomised physics (friction, payload, PD gains, its
terrain cell) lives in per-simulation fields of the one model, not in a model copy per env (whose cache footprint
cost 10-14% of the step rate).

Feet (TwinBackend.feet) come from sensors added per foot geom: a contact sensor against the world body (net force,
world frame), the geom's position and linear velocity. The batch keeps the sensordata of each env's last mj_step,
which MuJoCo evaluates before integrating: the feet are one physics step (sim_dt) behind the state after a step."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass

import mujoco
import mujoco.batch
import numpy as np

from sim.backends.base import TwinBackend
from sim.randomization import PhysicsParams
from sim.robot import RobotSpec, build_model, scaled_gains, set_pd_gains
from sim.terrain import TerrainGrid
from sim.terrain.mjspec import NAME as TERRAIN
from sim.terrain.mjspec import add_terrain, cell_hfields, set_heights

_FULL = mujoco.mjtState.mjSTATE_FULLPHYSICS.value
_INTEGRATION = mujoco.mjtState.mjSTATE_INTEGRATION.value
_CTRL = mujoco.mjtState.mjSTATE_CTRL.value
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
    meshes no geom uses any more; True if any went. They are most of a Menagerie robot's size (Go1: 37 MB with them,
    51 kB without; 1024 envs ran out of 24 GB when each env held a model copy), which every model(env_id) carries."""
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


@dataclass(frozen=True)
class EnvActuators:
    """One env's per-simulation actuator fields (views into the batch's), what set_pd_gains writes."""

    actuator_gainprm: np.ndarray
    actuator_biasprm: np.ndarray
    actuator_forcerange: np.ndarray


class MujocoBackend(TwinBackend):
    def __init__(self, spec: RobotSpec, num_envs: int, nthread: int | None = None, terrain: TerrainGrid | None = None):
        self.spec = spec
        self.num_envs = num_envs
        self.terrain = terrain

        def edit(mj: mujoco.MjSpec) -> None:
            if terrain is not None:
                add_terrain(mj, terrain)  # the world's planes become one heightfield geom, a cell an hfield each
            _add_foot_sensors(mj, spec.feet)  # contact against the world body: floor or terrain alike

        self.base_model = m = physics_model(spec, edit)
        if terrain is not None:
            set_heights(m, terrain)  # before the batch copies the model
        nthread = min(os.cpu_count() or 1, num_envs) if nthread is None else nthread
        self.batch = mujoco.batch.Batch(m, num_envs, nthread=max(nthread, 1))
        # [N, nstate] mjSTATE_INTEGRATION rows, live: the batch steps them in place
        self._state = self.batch.state
        self._state0 = self._state[0].copy()  # the model's initial state
        self._qpos, self._qvel = self.batch.bind("qpos"), self.batch.bind("qvel")
        self._ctrl, self._warmstart = self.batch.bind("ctrl"), self.batch.bind("qacc_warmstart")
        self._sensordata = self.batch.bind("sensordata")  # of each env's last call: mj_step, or the forward in feet()
        # raw_state's columns: the mjSTATE_FULLPHYSICS part of a row (an arange through the row picks them out)
        probe, cols = mujoco.MjData(m), np.empty(mujoco.mj_stateSize(m, _FULL))
        mujoco.mj_setState(m, probe, np.arange(self._state.shape[1], dtype=np.float64), _INTEGRATION)
        mujoco.mj_getState(m, probe, cols, _FULL)
        self._physics = cols.astype(int)
        base = m.body(spec.base_body).id
        self._base_id = base
        free = m.body_jntadr[base]
        self._base_q = int(m.jnt_qposadr[free])
        self._base_v = int(m.jnt_dofadr[free])
        self._joint_q = np.array([m.joint(j).qposadr[0] for j in spec.joints])
        self._joint_v = np.array([m.joint(j).dofadr[0] for j in spec.joints])
        self._mass0 = float(m.body_mass[base])
        self._inertia0 = m.body_inertia[base].copy()
        # the per-env model fields set_params and set_terrain write
        self._friction = self.batch.expand("geom_friction")
        self._mass, self._inertia = self.batch.expand("body_mass"), self.batch.expand("body_inertia")
        self._ipos0 = m.body_ipos[base].copy()
        self._frictionloss0 = m.dof_frictionloss[self._joint_v].copy()
        self._armature0 = m.dof_armature[self._joint_v].copy()
        self._ipos, self._frictionloss = self.batch.expand("body_ipos"), self.batch.expand("dof_frictionloss")
        self._armature = self.batch.expand("dof_armature")
        self._actuator_fields = {f.name: self.batch.expand(f.name) for f in dataclasses.fields(EnvActuators)}
        if terrain is not None:
            self._cells = cell_hfields(m, terrain)
            self._terrain_geom = m.geom(TERRAIN).id
            self._hfield = self.batch.expand("geom_dataid")
        adr = {name: int(m.sensor_adr[m.sensor(name).id]) for name in (m.sensor(i).name for i in range(m.nsensor))}
        self._force_cols = np.array([[adr[f"{f}_contact"] + 1 + k for k in range(3)] for f in spec.feet], int)
        self._pos_cols = np.array([[adr[f"{f}_pos"] + k for k in range(3)] for f in spec.feet], int)
        self._vel_cols = np.array([[adr[f"{f}_vel"] + k for k in range(3)] for f in spec.feet], int)
        self._sensors_fresh = np.zeros(num_envs, bool)  # False: the state was set since; feet() recomputes

    def step(self, targets: np.ndarray) -> None:
        # every step starts the solver from a zero warmstart, as mujoco.rollout (this backend's stepper before) did:
        # carrying the last one over changes results at float-noise level
        self._warmstart[:] = 0.0
        self.batch.rollout(targets.shape[1], control=targets, control_spec=_CTRL, record=())
        self._sensors_fresh[:] = True

    def reset(self, env_ids: np.ndarray) -> None:
        self._state[env_ids] = self._state0
        self._sensors_fresh[env_ids] = False

    def set_state(self, env_ids, base_pos, base_quat, base_lin_vel, base_ang_vel, joint_pos, joint_vel) -> None:
        q, v = self._base_q, self._base_v
        qpos_cols = np.concatenate([np.arange(q, q + 7), self._joint_q])
        qvel_cols = np.concatenate([np.arange(v, v + 6), self._joint_v])
        self._qpos[np.ix_(env_ids, qpos_cols)] = np.concatenate([base_pos, base_quat, joint_pos], axis=1)
        self._qvel[np.ix_(env_ids, qvel_cols)] = np.concatenate([base_lin_vel, base_ang_vel, joint_vel], axis=1)
        self._state[env_ids, 0] = 0.0  # time
        self._sensors_fresh[env_ids] = False

    def set_params(self, env_ids: np.ndarray, params: PhysicsParams) -> None:
        spec, nu, base = self.spec, self.spec.num_actions, self._base_id
        kp, kd = scaled_gains(spec, params.kp_scale, params.kd_scale)
        for k, i in enumerate(env_ids):
            self._friction[i, :, 0] = params.friction[k]
            mass = max(self._mass0 + params.payload_kg[k], 0.1 * self._mass0)
            self._mass[i, base] = mass
            self._inertia[i, base] = self._inertia0 * (mass / self._mass0)
            # the base and its payload as one body: the centre of mass moves by payload / total of the payload's
            # offset (the inertia's parallel-axis term is left out: centimetres, not metres)
            com = (params.payload_com_x[k], params.payload_com_y[k], params.payload_com_z[k])
            self._ipos[i, base] = self._ipos0 + (mass - self._mass0) / mass * np.asarray(com)
            self._frictionloss[i, self._joint_v] = self._frictionloss0 + params.joint_friction[k]  # the MJCF's and more
            self._armature[i, self._joint_v] = self._armature0 + params.joint_armature[k]
            actuators = EnvActuators(**{f: values[i] for f, values in self._actuator_fields.items()})
            set_pd_gains(actuators, spec, kp[k], kd[k], np.full(nu, params.motor_strength[k]))

    def set_terrain(self, env_ids: np.ndarray, levels: np.ndarray, types: np.ndarray) -> None:
        assert self.terrain is not None, "the twin sets terrain cells only on a backend built with terrain"
        self._hfield[env_ids, self._terrain_geom] = self._cells[levels, types]

    def state(self) -> dict[str, np.ndarray]:
        # copies, not views: the next step overwrites the state rows in place, and callers keep these arrays
        qpos, qvel = self._qpos, self._qvel
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
        """[N, mj_stateSize(mjSTATE_FULLPHYSICS)]: the rest of a row is the controls and the solver's warmstart,
        which every step sets afresh."""
        return self._state[:, self._physics]

    def load_raw_state(self, state: np.ndarray) -> None:
        expected = (self.num_envs, len(self._physics))
        if np.shape(state) != expected:
            raise ValueError(f"physics state of shape {np.shape(state)}, this model needs {expected}")
        self._state[:, self._physics] = state
        self._sensors_fresh[:] = False

    def feet(self) -> dict[str, np.ndarray]:
        stale = np.flatnonzero(~self._sensors_fresh)  # only envs set since the last step (resets, pushes)
        if stale.size:
            # the sensors of the state alone (zero controls and warmstart), as mjdata gives them
            self._ctrl[stale] = 0.0
            self._warmstart[stale] = 0.0
            self.batch.forward(stale)
        self._sensors_fresh[:] = True
        s = self._sensordata
        return {
            "contact_force": np.linalg.norm(s[:, self._force_cols], axis=-1),
            "pos": s[:, self._pos_cols],
            "vel": s[:, self._vel_cols],
        }

    def model(self, env_id: int) -> mujoco.MjModel:
        """A copy of env `env_id`'s model, its randomised fields included (writes to it do not reach the env)."""
        return self.batch.get_model(env_id)

    def mjdata(self, env_id: int) -> mujoco.MjData:
        """A fresh MjData of model(env_id) holding env `env_id`'s current state (for viewers, debugging and
        benchmarks)."""
        model = self.model(env_id)
        data = mujoco.MjData(model)
        mujoco.mj_setState(model, data, self._state[env_id, self._physics], _FULL)
        mujoco.mj_forward(model, data)
        return data
