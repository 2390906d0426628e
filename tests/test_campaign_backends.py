"""Twin backends behind sim.backends.base.TwinBackend: Newton for real on the CPU (tiny runs), sim-to-sim
agreement of one artifact's KPIs on MuJoCo and Newton, and Isaac Sim's clear refusal where it cannot run."""

import dataclasses
import importlib.util

import numpy as np
import pytest
from campaign_helpers import TINY_CAMPAIGN, export_rover_policy

from sim.backends.isaacsim_backend import isaacsim_unavailable_reason
from sim.backends.newton_backend import INSTALL_HINT
from sim.campaign.config import campaign_from_dict
from sim.campaign.matrix import batches
from sim.campaign.rollout import ArtifactFiles, run_batch
from sim.controllers import DiffDriveController
from sim.randomization import RandomizationConfig
from sim.robot import load_robot
from sim.twin import BatchedTwin

needs_newton = pytest.mark.skipif(
    importlib.util.find_spec("newton") is None or importlib.util.find_spec("warp") is None, reason=INSTALL_HINT
)
# Sim-to-sim tolerance (docs/campaigns.md): per scenario, the same fall outcome and tracking errors within these
# bounds. Energy and peak torque are not compared: penalty contacts (Newton) and MuJoCo's soft contacts give
# different start-up transients.
SIM2SIM_TOLERANCE = {"tracking_error_lin": 0.1, "tracking_error_ang": 0.2}


@needs_newton
def test_newton_twin_drives_the_rover_forward():
    twin = BatchedTwin(
        "rover",
        num_envs=2,
        seed=0,
        randomization=RandomizationConfig(enabled=False),
        backend="newton",
    ).hold_commands()
    twin.set_commands(np.array([0.5, 0.0, 0.0]))
    obs, _ = twin.reset()
    assert obs.shape == (2, twin.task.obs_dim) and obs.dtype == np.float32
    state = twin.backend.state()
    assert {k: v.shape for k, v in state.items()} == {
        "base_pos": (2, 3),
        "base_quat": (2, 4),
        "base_lin_vel": (2, 3),
        "base_ang_vel": (2, 3),
        "joint_pos": (2, 2),
        "joint_vel": (2, 2),
    }
    start = state["base_pos"].copy()
    controller = DiffDriveController(twin)
    for _ in range(25):  # 0.5 s
        obs, reward, terminated, truncated, info = twin.step(controller())
    state = twin.backend.state()
    assert not terminated.any() and np.all(np.isfinite(obs))
    assert np.all(state["base_pos"][:, 2] > 0.08)  # on its wheels (0.1 m axle height)
    lin, _ = twin.task.base_velocities(state)
    assert np.all(lin[:, 0] > 0.35)  # forward in its own frame, near the commanded 0.5 m/s
    assert np.all(np.linalg.norm(state["base_pos"][:, :2] - start[:, :2], axis=1) > 0.1)
    twin.close()


@needs_newton
def test_same_artifact_gives_comparable_kpis_on_mujoco_and_newton(tmp_path):
    files = ArtifactFiles.read(export_rover_policy(tmp_path / "policy"))
    cfg = campaign_from_dict(dict(TINY_CAMPAIGN, axes={"friction": [1.0], "commands": ["forward", "turn"]}))
    (job,) = batches(cfg)
    spec = load_robot("rover")
    kpis = {}
    for backend in ("mujoco", "newton"):
        rows = run_batch(job, dataclasses.replace(cfg, backend=backend), spec, files).rows
        kpis[backend] = {r["id"]: r["kpis"] for r in rows}
    for sid, mj in kpis["mujoco"].items():
        nt = kpis["newton"][sid]
        assert mj["falls"] == nt["falls"] == 0
        for k, tol in SIM2SIM_TOLERANCE.items():
            assert abs(mj[k] - nt[k]) <= tol, (sid, k, mj[k], nt[k])


@pytest.mark.skipif(isaacsim_unavailable_reason() is None, reason="Isaac Sim is installed: its refusal is moot")
def test_isaacsim_backend_names_what_is_missing():
    with pytest.raises(ImportError, match="RTX GPU"):
        BatchedTwin("rover", num_envs=1, backend="isaacsim")


@pytest.mark.skipif(isaacsim_unavailable_reason() is not None, reason=str(isaacsim_unavailable_reason()))
def test_isaacsim_twin_runs_the_task():
    twin = BatchedTwin("rover", num_envs=2, randomization=RandomizationConfig(enabled=False), backend="isaacsim")
    obs, _ = twin.reset()
    obs, *_ = twin.step(np.zeros((2, 2)))
    assert obs.shape == (2, twin.task.obs_dim) and np.all(np.isfinite(obs))
    twin.close()
