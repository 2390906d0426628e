"""Isaac Sim backend: the robot's MJCF converted to USD by Isaac Sim's MJCF importer, one articulation per env
in one PhysX scene (envs on a grid, reported relative to their own origin), stepped headless.

The actuators are the robot YAML's PD law evaluated here and applied as joint efforts (the articulation's own
drives are switched off), as on the Newton backend, so the task, KPIs and actuator match the other backends.

Requirements (not met by any machine in this workplace, so this backend is untested here): Isaac Sim 5.x or
6.x from pip (`pip install "isaacsim[all,extscache]"` with its NVIDIA index; Python 3.11, glibc >= 2.35), an
NVIDIA RTX GPU (RT cores: RTX/Quadro, L4, L40; not A100/H100/H200) with driver >= 550, and acceptance of the
NVIDIA Omniverse EULA (OMNI_KIT_ACCEPT_EULA=YES). Written against the documented Python API
(isaacsim.asset.importer.mjcf.MJCFImporter, isaacsim.core.api.World, isaacsim.core.prims.Articulation).
"""

from __future__ import annotations

import importlib.util
import shutil
import tempfile

import numpy as np

from sim.backends.base import MODEL_ONLY_PARAMS, TwinBackend
from sim.randomization import PhysicsParams
from sim.robot import RobotSpec, pd_torques, scaled_gains

REQUIREMENTS = (
    'the isaacsim backend needs Isaac Sim 5.x/6.x (`pip install "isaacsim[all,extscache]"`), an NVIDIA RTX GPU '
    "with driver >= 550 and OMNI_KIT_ACCEPT_EULA=YES"
)
ENV_SPACING = 4.0  # m between env origins: far enough apart that robots never touch


def isaacsim_unavailable_reason() -> str | None:
    """Why the backend cannot start here (None when the pieces are present; Isaac Sim itself still checks
    that the GPU has RT cores when it starts)."""
    if importlib.util.find_spec("isaacsim") is None:
        return f"isaacsim is not installed: {REQUIREMENTS}"
    if shutil.which("nvidia-smi") is None:
        return f"no NVIDIA driver found (nvidia-smi): {REQUIREMENTS}"
    return None


def _quat_rotate(q: np.ndarray, v: np.ndarray) -> np.ndarray:
    w, u = q[:, :1], q[:, 1:]
    t = 2.0 * np.cross(u, v)
    return v + w * t + np.cross(u, t)


class IsaacSimBackend(TwinBackend):
    def __init__(self, spec: RobotSpec, num_envs: int, nthread: int | None = None):
        """`nthread` is accepted for the interface and ignored (PhysX runs on the GPU)."""
        reason = isaacsim_unavailable_reason()
        if reason is not None:
            raise ImportError(reason)
        # Isaac Sim is installed by hand on an RTX machine (REQUIREMENTS), not by any extra of this package
        from isaacsim import SimulationApp  # pyright: ignore[reportMissingImports]

        self._app = SimulationApp({"headless": True})  # must start before any omni/isaacsim.core import
        from isaacsim.asset.importer.mjcf import MJCFImporter, MJCFImporterConfig  # pyright: ignore[reportMissingImports]
        from isaacsim.core.api import World  # pyright: ignore[reportMissingImports]
        from isaacsim.core.api.materials import PhysicsMaterial  # pyright: ignore[reportMissingImports]
        from isaacsim.core.prims import Articulation, GeometryPrim  # pyright: ignore[reportMissingImports]
        from isaacsim.core.utils.stage import add_reference_to_stage  # pyright: ignore[reportMissingImports]

        self.spec, self.num_envs = spec, num_envs
        self._usd_dir = tempfile.mkdtemp(prefix="isaacsim-robot-")
        usd = MJCFImporter(
            MJCFImporterConfig(mjcf_path=str(spec.mjcf), usd_path=self._usd_dir, import_scene=False, fix_base=False)
        ).import_mjcf()
        self.world = World(physics_dt=spec.physics_dt, rendering_dt=spec.control_dt, backend="numpy")
        self.world.scene.add_default_ground_plane()
        side = int(np.ceil(np.sqrt(num_envs)))
        self._origins = np.zeros((num_envs, 3))
        self._origins[:, 0] = (np.arange(num_envs) % side) * ENV_SPACING
        self._origins[:, 1] = (np.arange(num_envs) // side) * ENV_SPACING
        for i in range(num_envs):
            add_reference_to_stage(usd, f"/World/env_{i}/robot")
        self.view = Articulation("/World/env_.*/robot", name="robots")
        self._geoms = [GeometryPrim(f"/World/env_{i}/robot/.*") for i in range(num_envs)]
        self._material = PhysicsMaterial
        self.world.scene.add(self.view)
        self.world.reset()
        self._dof = np.array([self.view.get_dof_index(j) for j in spec.joints])
        self._base_link = self.view.get_body_index(spec.base_body)
        n = num_envs
        self.view.set_gains(kps=np.zeros((n, self.view.num_dof)), kds=np.zeros((n, self.view.num_dof)))
        kp, kd = scaled_gains(spec, np.ones(n), np.ones(n))
        self._gains = {"kp": kp, "kd": kd, "strength": np.ones(n)}
        self._mass0 = float(self.view.get_body_masses()[0, self._base_link])
        self._com = np.asarray(self.view.get_body_coms()[0][0, self._base_link])  # base COM in the base frame
        positions, orientations = self.view.get_world_poses()
        self._init = (positions - self._origins, orientations, self.view.get_joint_positions())

    def _torques(self, targets: np.ndarray) -> np.ndarray:
        q = self.view.get_joint_positions()[:, self._dof]
        qd = self.view.get_joint_velocities()[:, self._dof]
        g = self._gains
        return pd_torques(self.spec, {"joint_pos": q, "joint_vel": qd}, targets, g["kp"], g["kd"], g["strength"])

    def step(self, targets: np.ndarray) -> None:
        for k in range(targets.shape[1]):
            self.view.set_joint_efforts(self._torques(targets[:, k]), joint_indices=self._dof)
            self.world.step(render=False)

    def state(self) -> dict[str, np.ndarray]:
        positions, quat = self.view.get_world_poses()  # (w, x, y, z)
        omega = self.view.get_angular_velocities()  # world frame
        conj = quat * np.array([1.0, -1.0, -1.0, -1.0])
        com_offset = _quat_rotate(quat, np.broadcast_to(self._com, (self.num_envs, 3)))
        return {
            "base_pos": positions - self._origins,
            "base_quat": quat,
            # PhysX reports the COM's velocity; the twin's convention is the base origin's (MuJoCo's)
            "base_lin_vel": self.view.get_linear_velocities() - np.cross(omega, com_offset),
            "base_ang_vel": _quat_rotate(conj, omega),
            "joint_pos": self.view.get_joint_positions()[:, self._dof],
            "joint_vel": self.view.get_joint_velocities()[:, self._dof],
        }

    def reset(self, env_ids: np.ndarray) -> None:
        pos, quat, joints = self._init
        ids = np.asarray(env_ids)
        self.view.set_world_poses(pos[ids] + self._origins[ids], quat[ids], indices=ids)
        self.view.set_joint_positions(joints[ids], indices=ids)
        self.view.set_joint_velocities(np.zeros_like(joints[ids]), indices=ids)

    def set_state(self, env_ids, base_pos, base_quat, base_lin_vel, base_ang_vel, joint_pos, joint_vel) -> None:
        ids = np.asarray(env_ids)
        self.view.set_world_poses(np.asarray(base_pos) + self._origins[ids], np.asarray(base_quat), indices=ids)
        quat = np.asarray(base_quat)
        omega = _quat_rotate(quat, np.asarray(base_ang_vel))
        com_offset = _quat_rotate(quat, np.broadcast_to(self._com, (len(ids), 3)))
        self.view.set_linear_velocities(np.asarray(base_lin_vel) + np.cross(omega, com_offset), indices=ids)
        self.view.set_angular_velocities(omega, indices=ids)
        self.view.set_joint_positions(np.asarray(joint_pos), indices=ids, joint_indices=self._dof)
        self.view.set_joint_velocities(np.asarray(joint_vel), indices=ids, joint_indices=self._dof)

    def set_params(self, env_ids: np.ndarray, params: PhysicsParams) -> None:
        self.refuse_params(params, MODEL_ONLY_PARAMS)
        ids = np.asarray(env_ids)
        mass = np.maximum(self._mass0 + np.asarray(params.payload_kg), 0.1 * self._mass0)
        self.view.set_body_masses(mass[:, None], indices=ids, body_indices=np.array([self._base_link]))
        for k, i in enumerate(ids):
            mu = float(params.friction[k])
            material = self._material(f"/World/materials/env_{i}", static_friction=mu, dynamic_friction=mu)
            self._geoms[i].apply_physics_materials(material)
        self._gains["kp"][ids], self._gains["kd"][ids] = scaled_gains(self.spec, params.kp_scale, params.kd_scale)
        self._gains["strength"][ids] = params.motor_strength

    def close(self) -> None:
        self._app.close()
        shutil.rmtree(self._usd_dir, ignore_errors=True)
