"""The robot's left-right mirror: read from the MJCF, it maps a motion of the twin to its mirror image (real MuJoCo),
and PPO's update takes the mirrored samples through rsl_rl's symmetry extension."""

import numpy as np
import pytest
import torch
from tensordict import TensorDict

from edge.observation import GAIT_HZ
from sim.randomization import RandomizationConfig
from sim.robot import load_robot
from sim.symmetry import JointMirror, SymmetryError, observation_mirror
from sim.tasks.loader import TASK_CONFIG_DIRS
from sim.tasks.terms import REWARDS, FootTracker, TermContext
from sim.twin import BatchedTwin
from training.ppo.config import PPOConfig
from training.ppo.runner import PPORunner
from training.ppo.symmetry import mirror_augmentation
from training.vec_env import OBS_GROUP

AIR_TIME_TASK = TASK_CONFIG_DIRS[0] / "velocity_quadruped_air_time.yaml"  # the quadruped's task without the clock


def test_the_quadrupeds_mirror_pairs_its_legs_and_flips_the_hips():
    spec = load_robot("quadruped")
    mirror = JointMirror.of(spec)
    twins = dict(zip(spec.joints, mirror.twins, strict=True))
    assert twins["FL_hip_joint"] == "FR_hip_joint" and twins["RR_calf_joint"] == "RL_calf_joint"
    signs = dict(zip(spec.joints, mirror.joints.sign, strict=True))
    assert signs["FL_hip_joint"] == -1 and signs["FL_thigh_joint"] == 1 and signs["FL_calf_joint"] == 1
    x = np.arange(1.0, 13.0)
    assert np.array_equal(mirror.joints(mirror.joints(x)), x)  # a mirror is its own inverse


def _mirrored_state(state: dict, mirror: JointMirror) -> dict:
    """The state reflected through the base's x-z plane (world y -> -y)."""
    w, x, y, z = state["base_quat"].T
    return {
        "base_pos": state["base_pos"] * [1, -1, 1],
        "base_quat": np.stack([w, -x, y, -z], axis=1),  # R -> M R M
        "base_lin_vel": state["base_lin_vel"] * [1, -1, 1],  # world frame
        "base_ang_vel": state["base_ang_vel"] * [-1, 1, -1],  # body frame, a pseudovector
        "joint_pos": mirror.joints(state["joint_pos"]),
        "joint_vel": mirror.joints(state["joint_vel"]),
    }


def test_a_mirrored_motion_of_the_twin_observes_as_the_mirrored_observation():
    """Both envs at one clock time, so on the air-time task: the clock's mirror (half a period later) is the next
    test's."""
    spec = load_robot("quadruped")
    mirror = JointMirror.of(spec)
    twin = BatchedTwin(
        spec, num_envs=2, task=AIR_TIME_TASK, randomization=RandomizationConfig(enabled=False), seed=3
    ).hold_commands()
    twin.reset()
    obs_mirror = observation_mirror(mirror, list(twin.task.cfg.observations))
    rng = np.random.default_rng(0)
    start = twin.backend.state()
    start["base_pos"][0, :2] = [0.3, 0.2]
    start["base_lin_vel"][0] = [0.4, 0.3, 0.0]
    start["base_ang_vel"][0] = [0.2, -0.1, 0.5]
    start["joint_pos"][0] += rng.uniform(-0.2, 0.2, 12)
    one = {k: v[:1] for k, v in start.items()}
    both = {k: np.concatenate([one[k], _mirrored_state(one, mirror)[k]]) for k in one}
    twin.backend.set_state(np.arange(2), *(both[k] for k in _mirrored_state(one, mirror)))
    twin.set_commands(np.array([[0.5, 0.3, 0.4], [0.5, -0.3, -0.4]]))
    assert np.allclose(twin.observations[1], obs_mirror(twin.observations[0]), atol=1e-5)
    for _ in range(10):
        action = rng.uniform(-1, 1, 12)
        obs, *_ = twin.step(np.stack([action, mirror.joints(action)]))
        # contacts are solved in the model's geom order, which the mirror swaps: equal to solver precision only
        assert np.allclose(obs[1], obs_mirror(obs[0]), atol=2e-3), np.abs(obs[1] - obs_mirror(obs[0])).max()
    assert np.abs(obs[0] - obs_mirror(obs[0])).max() > 0.1  # the motion itself was not symmetric


def test_the_mirror_of_the_gait_clock_is_half_a_period_later():
    """The mirror swaps a trot's diagonal pairs: the mirror image of a motion at clock time t is a motion at t plus
    half a period, observed (real MuJoCo states) and rewarded (hand-made foot states) alike."""
    spec = load_robot("quadruped")
    mirror = JointMirror.of(spec)
    twin = BatchedTwin(spec, num_envs=2, randomization=RandomizationConfig(enabled=False), seed=3)  # its task clocks
    twin.hold_commands().reset()
    terms = list(twin.task.cfg.observations)
    obs_mirror = observation_mirror(mirror, terms)
    clock = sum(twin.task.layout.terms[i].size for i in range(terms.index("gait_phase")))
    assert obs_mirror.index[clock : clock + 2].tolist() == [clock, clock + 1]
    assert obs_mirror.sign[clock : clock + 2].tolist() == [-1.0, -1.0]
    rng = np.random.default_rng(1)
    start = twin.backend.state()
    start["joint_pos"][0] += rng.uniform(-0.2, 0.2, 12)
    one = {k: v[:1] for k, v in start.items()}
    state = {k: np.concatenate([one[k], _mirrored_state(one, mirror)[k]]) for k in one}
    commands = np.array([[0.5, 0.3, 0.4], [0.5, -0.3, -0.4]])
    action = rng.uniform(-1, 1, 12)
    actions = np.stack([action, mirror.joints(action)])
    half = 0.5 / GAIT_HZ
    for t in (0.0, 0.06, 0.3, 7.14):
        obs = twin.task.observe(state, commands, actions, 0.0, rng, episode_time=np.array([t, t + half]))
        assert np.allclose(obs[1], obs_mirror(obs[0]), atol=1e-5)
    feet_mirror = [1, 0, 3, 2]  # FR, FL, RR, RL: each foot's mirror image
    tracker = FootTracker(2, 4, spec.control_dt, contact_force_n=1.0)
    swing = np.array([True, False, False, True])
    pos = np.zeros((2, 4, 3))
    pos[0, :, 2] = np.where(swing, 0.06, 0.022)
    pos[1] = pos[0, feet_mirror]
    vel = rng.uniform(-0.2, 0.2, (2, 4, 3))
    vel[1] = vel[0, feet_mirror] * [1, -1, 1]
    force = np.where(np.stack([swing, swing[feet_mirror]]), 0.0, 30.0)
    tracker.update({"contact_force": force, "pos": pos, "vel": vel})
    rewards = []
    for t in (0.0, 0.06, 0.3):  # the feet on, near and against the clock
        ctx = TermContext(spec, state, commands=commands, feet=tracker, episode_time=np.array([t, t + half]))
        rewards.append(REWARDS["gait_phase_contact"](ctx))
    assert np.allclose(*np.transpose(rewards)) and len({round(r[0], 6) for r in rewards}) == 3


def test_a_robot_without_a_twin_for_a_joint_has_no_mirror(tmp_path):
    mjcf = tmp_path / "one_arm.xml"
    mjcf.write_text(
        """<mujoco><worldbody><body name="base" pos="0 0 0.5"><freejoint/><geom type="box" size=".2 .1 .05"/>
        <body name="arm" pos="0 0.1 0"><joint name="shoulder" axis="1 0 0"/><geom type="capsule" size=".02"
        fromto="0 0 0 0 0 -0.2"/></body></body></worldbody></mujoco>"""
    )
    (tmp_path / "one_arm.yaml").write_text(
        "name: one_arm\nmjcf: one_arm.xml\nbase_body: base\njoints: [shoulder]\ndefault_pose: [0.0]\n"
        "kp: 10.0\nkd: 1.0\ntorque_limit: [5.0]\n"
    )
    spec = load_robot(tmp_path / "one_arm.yaml")
    with pytest.raises(SymmetryError, match="joint shoulder has no mirror twin"):
        JointMirror.of(spec)
    with pytest.raises(SymmetryError, match="observation term 'height_scan' has no mirror"):
        observation_mirror(JointMirror.of(load_robot("quadruped")), ["base_lin_vel", "height_scan"])


def test_the_augmentation_appends_the_mirror_images_after_the_originals():
    mirror = JointMirror.of(load_robot("quadruped"))
    terms = ["base_lin_vel", "base_ang_vel", "projected_gravity", "velocity_command", "joint_pos"]
    obs_mirror = observation_mirror(mirror, terms)
    augment = mirror_augmentation(obs_mirror, mirror.joints)
    obs = TensorDict({OBS_GROUP: torch.randn(5, 24)}, batch_size=[5])
    actions = torch.randn(5, 12)
    out_obs, out_actions = augment(obs=obs, actions=actions)
    assert out_obs[OBS_GROUP].shape == (10, 24) and out_actions.shape == (10, 12)
    assert torch.equal(out_obs[OBS_GROUP][:5], obs[OBS_GROUP]) and torch.equal(out_actions[:5], actions)
    expected = torch.from_numpy(obs_mirror(obs[OBS_GROUP].numpy())).float()
    assert torch.allclose(out_obs[OBS_GROUP][5:], expected)
    assert torch.equal(out_obs[OBS_GROUP][5:, :3], obs[OBS_GROUP][:, :3] * torch.tensor([1.0, -1.0, 1.0]))
    assert augment(obs=None, actions=actions)[0] is None


def test_ppo_updates_with_the_mirror_and_reports_its_loss(tmp_path):
    cfg = PPOConfig.for_robot(
        "quadruped", num_envs=32, num_steps_per_env=8, iterations=1, eval_every=0, eval_envs=4, eval_seconds=1.0,
        run_root=str(tmp_path), export=False, symmetry_augmentation=True, mirror_loss_coeff=0.5,
    )  # fmt: skip
    runner = PPORunner(cfg, tmp_path / "run")
    try:
        assert runner.alg.symmetry is not None and runner.alg.symmetry.use_mirror_loss
        runner.collect()
        losses = runner._update()
    finally:
        runner.close()
    assert "symmetry" in losses and np.isfinite(losses["symmetry"]) and losses["symmetry"] > 0
    plain = PPOConfig.for_robot("quadruped", num_envs=8, run_root=str(tmp_path), export=False)
    assert not (plain.symmetry_augmentation or plain.mirror_loss_coeff)


def test_a_mirror_policy_acts_as_the_mirror_image_of_itself_in_training_and_in_its_export(tmp_path):
    """mirror_policy: the trained actor's action on a mirrored observation is the mirror of its action (random
    weights, a normaliser with real statistics), the same after the run's export to ONNX, run by ONNX Runtime; the
    actor has a plain MLP's parameters, so its checkpoint loads back."""
    from edge.runtime import load_policy
    from training.ppo.checkpoint import checkpoint_in, load_checkpoint
    from training.ppo.export_hook import actor_from_checkpoint, export_run
    from training.ppo.models import MirrorSymmetricActor

    cfg = PPOConfig.for_robot(
        "quadruped", num_envs=16, num_steps_per_env=8, iterations=1, eval_every=0, eval_envs=4, eval_seconds=1.0,
        run_root=str(tmp_path), export=False, mirror_policy=True,
    )  # fmt: skip
    runner = PPORunner(cfg, tmp_path / "run")
    try:
        runner.learn()
        actor = runner.alg.actor
        assert isinstance(actor, MirrorSymmetricActor)
        mirror = JointMirror.of(runner.spec)
        obs_mirror = observation_mirror(mirror, list(runner.task.observations))
    finally:
        runner.close()
    obs = torch.randn(64, actor.obs_dim) * 2.0
    mirrored = torch.from_numpy(obs_mirror(obs.numpy())).float()
    with torch.inference_mode():
        act = actor(TensorDict({OBS_GROUP: obs}, batch_size=[64]))
        act_of_mirror = actor(TensorDict({OBS_GROUP: mirrored}, batch_size=[64]))
    assert not torch.allclose(act, act_of_mirror, atol=1e-3)  # not trivially symmetric: it acts
    torch.testing.assert_close(
        act_of_mirror, act[:, mirror.joints.index] * torch.from_numpy(mirror.joints.sign).float()
    )
    loaded = actor_from_checkpoint(load_checkpoint(checkpoint_in(tmp_path / "run")))
    assert isinstance(loaded, MirrorSymmetricActor)
    policy = load_policy(export_run(tmp_path / "run"), "onnxruntime")
    np.testing.assert_allclose(policy.infer(mirrored.numpy()), act_of_mirror.numpy(), atol=1e-4)
