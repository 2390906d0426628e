"""Fine-tuning support in PPO: a new run starts from another run's weights and normalisers, with randomisation
ranges centred where system identification put them."""

import pytest
import torch

from sim.randomization import Rehearsal
from sim2real.retrain.pipeline import finetune_ranges
from training.ppo.checkpoint import load_checkpoint
from training.ppo.config import ConfigError, PPOConfig
from training.ppo.runner import PPORunner
from training.retrain.config import Budget, RetrainConfig

SMALL = {
    "num_envs": 16,
    "eval_envs": 4,
    "num_steps_per_env": 4,
    "num_mini_batches": 2,
    "iterations": 1,
    "actor_hidden_dims": [16],
    "critic_hidden_dims": [16],
    "nthread": 1,
}


@pytest.fixture(scope="module")
def source_checkpoint(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("source")
    runner = PPORunner(PPOConfig.for_robot("rover", seed=1, **SMALL), run_dir)
    runner.collect()
    runner._update()  # weights and normalisers that differ from a fresh initialisation
    runner.iteration = 1
    path = runner.save()
    runner.close()
    return path


def _same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_init_from_starts_a_new_run_with_the_source_weights(source_checkpoint):
    saved = load_checkpoint(source_checkpoint)
    fresh = PPORunner(PPOConfig.for_robot("rover", seed=2, **SMALL))
    tuned = PPORunner(PPOConfig.for_robot("rover", seed=2, init_from=str(source_checkpoint.parent.parent), **SMALL))
    try:
        assert not _same(fresh.alg.actor.state_dict(), saved["actor"])
        assert _same(tuned.alg.actor.state_dict(), saved["actor"])  # weights and observation normaliser
        assert _same(tuned.alg.critic.state_dict(), saved["critic"])
        assert tuned.iteration == 0 and tuned.env_steps == 0  # a new run, not a resumed one
    finally:
        fresh.close()
        tuned.close()


def test_init_from_refuses_other_networks(source_checkpoint):
    with pytest.raises(ConfigError, match="actor_hidden_dims"):
        PPORunner(PPOConfig.for_robot("rover", init_from=str(source_checkpoint), **{**SMALL, "actor_hidden_dims": [8]}))


def test_randomisation_centred_on_identified_values():
    ranges = RetrainConfig.from_yaml().centred_ranges({"payload_kg": 3.0, "latency_s": 0.06})
    assert ranges["payload_kg"] == pytest.approx([2.5, 3.5]) and ranges["latency_s"] == pytest.approx([0.05, 0.07])
    runner = PPORunner(PPOConfig.for_robot("rover", randomization_ranges=ranges, **SMALL))
    try:
        r = runner.env.twin.randomization
        assert r.payload_kg == pytest.approx((2.5, 3.5)) and r.latency_s == pytest.approx((0.05, 0.07))
        assert r.friction == runner.task.randomization.friction  # not identified: the task YAML's range
        runner.evaluate()
        assert runner.evaluator.twin.randomization == r  # the threshold is judged on the same physics
        # the twin draws inside the centred ranges
        assert ((runner.env.twin.params.payload_kg >= 2.5) & (runner.env.twin.params.payload_kg <= 3.5)).all()
    finally:
        runner.close()
    # a centre of mass behind the base's stays behind it; joint friction, which cannot be negative, stops at zero
    ranges = RetrainConfig.from_yaml().centred_ranges({"payload_com_x": -0.1, "joint_friction": 0.02})
    assert ranges["payload_com_x"] == pytest.approx([-0.12, -0.08]) and ranges["joint_friction"] == [0.0, 0.07]
    # a parameter the logs do not determine is randomised over its whole 95% interval (any value in it may be the
    # robot's) and the twin as trained; a sysid record from before intervals existed centres on every value
    estimates = {
        "payload_kg": {"value": 3.0, "low": 2.9, "high": 3.1, "determined": True},
        "latency_s": {"value": 0.09, "low": 0.05, "high": 0.1, "determined": False},
        "kp_scale": {"value": 0.8, "low": 0.6, "high": 0.85, "determined": False},
    }
    ranges = finetune_ranges(RetrainConfig.from_yaml(), {"values": {}, "estimates": estimates})
    assert ranges == {"payload_kg": pytest.approx([2.5, 3.5]), "latency_s": [0.0, 0.1], "kp_scale": [0.6, 1.0]}
    old = finetune_ranges(RetrainConfig.from_yaml(), {"values": {"latency_s": 0.09}})
    assert old == {"latency_s": pytest.approx([0.08, 0.1])}
    with pytest.raises(ConfigError, match=r"randomization_ranges: unknown key\(s\) gravity"):
        PPOConfig.for_robot("rover", randomization_ranges={"gravity": [1, 2]})


def test_a_legged_robot_fine_tunes_with_the_budgets_legged_overrides():
    budget = Budget(finetune={"iterations": 120, "learning_rate": 3e-4}, finetune_legged={"iterations": 60})
    legged, wheeled = budget.finetune_for(legged=True), budget.finetune_for(legged=False)
    assert wheeled == budget.finetune and legged["iterations"] == 60
    assert legged["learning_rate"] == 3e-4  # the rest as for every robot
    with pytest.raises(ConfigError, match="finetune_legged"):
        Budget(finetune_legged={"iterationz": 3})


def test_an_encoder_offset_is_neither_randomised_nor_an_axis_of_the_identified_twin():
    """A sensor's parameter is in the robot's readings, not the twin's physics."""
    from sim.campaign.config import load_campaign
    from sim2real.retrain.pipeline import identified_twin_campaign

    ranges = RetrainConfig.from_yaml().finetune_ranges(
        {"latency_s": 0.04, "encoder_offset": 0.01}, {"encoder_offset": (0.0, 0.02), "payload_kg": (1.0, 3.0)}
    )
    assert set(ranges) == {"latency_s", "payload_kg"}
    twin = identified_twin_campaign(load_campaign("quick"), {"latency_s": 0.04, "encoder_offset": 0.01})
    assert twin.axes["latency_s"] == [0.04] and "encoder_offset" not in twin.axes


def test_a_fine_tuning_rehearses_the_twin_the_run_was_trained_on(source_checkpoint, tmp_path):
    """rehearsal_share of the fine-tuning's envs keep the deployed run's own randomisation: the task's for a
    randomised run, the nominal twin (no noise, no pushes) for one trained on it; the others draw the new ranges."""
    import shutil

    from sim.robot import load_robot
    from sim.tasks import load_task
    from training.retrain.finetune import finetune_config

    def deployed_run(name: str, randomization: bool):
        run_dir = tmp_path / name
        shutil.copytree(source_checkpoint.parent.parent, run_dir)
        PPOConfig.for_robot("rover", randomization=randomization, **SMALL).save_yaml(run_dir / "config.yaml")
        return run_dir

    task = load_task(load_robot("rover")).randomization
    ranges, share = {"payload_kg": [2.5, 3.5]}, {"rehearsal_share": 0.5}
    randomised = finetune_config(deployed_run("randomised", True), ranges, tmp_path / "a", share)
    drawn = randomised.twin_randomization(task)
    assert isinstance(drawn, Rehearsal) and drawn.rehearsed == task and drawn.share == 0.5
    assert drawn.randomization.payload_kg == pytest.approx((2.5, 3.5))

    nominal = finetune_config(deployed_run("nominal", False), ranges, tmp_path / "b", share)
    drawn = nominal.twin_randomization(task)
    assert isinstance(drawn, Rehearsal)
    r = drawn.rehearsed
    assert r.payload_kg == (0.0, 0.0) and r.kp_scale == (1.0, 1.0) and r.obs_noise == 0.0 and r.push_interval_s == 0
    runner = PPORunner(nominal)
    try:
        payload = runner.env.twin.params.payload_kg
        assert (payload[:8] == 0.0).all() and ((payload[8:] >= 2.5) & (payload[8:] <= 3.5)).all()
    finally:
        runner.close()
    assert not isinstance(
        finetune_config(deployed_run("c", True), ranges, tmp_path / "c", {}).twin_randomization(task), Rehearsal
    )


def test_a_fine_tuning_draws_its_duty_share_from_the_logged_commands_and_none_without_them(source_checkpoint, tmp_path):
    import shutil

    from training.retrain.finetune import finetune_config

    run_dir = tmp_path / "deployed"
    shutil.copytree(source_checkpoint.parent.parent, run_dir)
    PPOConfig.for_robot("rover", **SMALL).save_yaml(run_dir / "config.yaml")
    duty = [[0.5, 0.0, 0.0, 0.6], [0.0, 0.0, 0.8, 0.4]]
    tuned = finetune_config(run_dir, {}, tmp_path / "a", {"duty_share": 0.5}, duty=duty)
    assert tuned.duty == duty and tuned.duty_share == 0.5
    silent = finetune_config(run_dir, {}, tmp_path / "b", {"duty_share": 0.5}, duty=[])
    assert silent.duty is None and silent.duty_share == 0.0  # a log without commands: every draw is the task's


def test_the_emphasis_scales_the_reward_terms_behind_the_drifted_kpis():
    from training.retrain.config import Emphasis, RetrainConfig

    emphasis = Emphasis(scale=2.0, terms={"tracking_error_ang": ("tracking_ang_vel",), "falls": ()})
    assert emphasis.reward_scales(["tracking_error_ang", "falls"]) == {"tracking_ang_vel": 2.0}
    assert emphasis.reward_scales(["tracking_error_lin"]) == {}  # a KPI without a term: nothing weighs more
    assert emphasis.reward_scales([]) == {}  # a retraining forced without drift
    assert Emphasis(scale=1.0, terms=emphasis.terms).reward_scales(["tracking_error_ang"]) == {}
    shipped = RetrainConfig.from_yaml().emphasis
    assert shipped.scale > 1 and shipped.reward_scales(["tracking_error_ang"]) == {"tracking_ang_vel": shipped.scale}
