"""The driver of tests/test_cluster.py's RL test: RL on the minimal model with its vLLM engine in a Ray actor on
CPU, on a running cluster, as `sim2real rlhf rl --ray-engines 1 --ray-address ADDRESS --ray-engine-device cpu`
runs it (RLTrainer.train, two iterations), reading the actor's greedy plans for held-out instructions beside
transformers' on the trainer's weights before RL and after every sync. Then the trainer's weights perturbed and
synced (the engine's greedy plans before and after), and a sync from a directory the actor cannot see. Prints
one JSON line.

    python tests/ray_rl_driver.py ADDRESS SFT_DIR REWARD_DIR OUT_DIR
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

from edge.instruct.prompt import model_input
from edge.instruct.safety import screen_instruction
from edge.resources import config_path
from training.rlhf.config import RLConfig
from training.rlhf.engine import sync_marker
from training.rlhf.generation import HFGenerator
from training.rlhf.rl import RLTrainer

HELD_OUT = 6  # instructions, spread over config/rlhf/heldout.jsonl
NOISE = 1.0  # the perturbation: Gaussian noise of this many standard deviations of each weight tensor


def greedy(generator, prompts: list[str]) -> list[str]:
    """Unconstrained greedy plans: the model's own argmax, with no grammar between it and the text."""
    return [group[0].text for group in generator.generate(prompts, constrained=False)]


def held_out_prompts(trainer: RLTrainer) -> list[str]:
    lines = config_path("rlhf", "heldout.jsonl").read_text().splitlines()
    texts = [json.loads(line)["instruction"] for line in lines[:: len(lines) // HELD_OUT][:HELD_OUT]]
    return [
        model_input(screen_instruction(t, trainer.limits)[0], None, trainer.number_slots, trainer.chat_prompt).prompt
        for t in texts
    ]


def perturb(model: torch.nn.Module) -> None:
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=generator) * (NOISE * p.std().item() + 1e-3))


def main(address: str, sft: str, reward: str, out: str) -> dict:
    import ray

    out_dir = Path(out)
    config = RLConfig(
        out=str(out_dir / "rl"),
        model=sft,
        reward_model=reward,
        ray_engines=1,
        ray_address=address,
        ray_engine_device="cpu",
        ray_engine_cpus=1,
        # the minimal budget's RL (config/rlhf/budgets.yaml), with a short validation split
        iterations=2,
        prompts_per_iteration=8,
        learning_rate=5e-4,
        epochs=2,
        validation_examples=8,
        validate_every=2,
        sync_dir=str(out_dir),
    )
    trainer = RLTrainer(config)  # the actor starts here and gets the SFT weights
    try:
        prompts = held_out_prompts(trainer)
        hf = HFGenerator(trainer.policy, trainer.tokenizer)
        synced = []

        def compare(stage: str) -> None:
            synced.append(
                {"stage": stage, "engine": greedy(trainer.engine, prompts), "transformers": greedy(hf, prompts)}
            )

        compare("sft")
        summary = trainer.train(lambda stats: compare(f"iteration {stats['iteration'] + 1}"))
        before = greedy(trainer.engine, prompts)  # the last iteration's weights (train may revert the policy)
        perturb(trainer.policy)
        trainer.sync()
        compare("perturbed")
        unseen = out_dir / "on-another-machine"  # what a node sees of a sync_dir that is not shared: nothing
        try:
            ray.get(trainer.engine.engines[0].load_synced.remote(str(unseen), sync_marker(trainer.sync_dir)))
            not_shared = "reloaded"
        except ray.exceptions.RayTaskError as e:
            not_shared = str(e)
        record = {
            "placement": trainer.engine.placement,
            "synced": synced,
            "before_perturbed_sync": before,
            "not_shared": not_shared,
            "summary": summary,
        }
    finally:
        trainer.close()
    return record


if __name__ == "__main__":
    print(json.dumps(main(*sys.argv[1:5])))
