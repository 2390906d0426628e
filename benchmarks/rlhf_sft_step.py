"""SFT on the pretrained base: seconds per optimiser step of a full fine-tune against LoRA (peft), same batch of
real demonstrations (the chat-template prompt and the plan, padded to the batch's longest), same run; and what
the number format costs in tokens: plans written with slots (#1, #2, ...) and with plain numbers, under the base's
tokenizer and the scratch model's.

    python -m benchmarks.rlhf_sft_step [--quick] [--batch 8] [--steps 3]

Each mode runs one warm-up step, then `--steps` timed ones (the mean is reported). The last line is the JSON
figure: LoRA's step time with the full fine-tune's as the baseline.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402 - the thread count must be set before torch is imported
import json  # noqa: E402
import random  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402


def _token_counts(examples: int) -> dict:
    """Mean plan tokens (with end-of-sequence) per format and tokenizer, and mean prompt tokens as each model reads
    them, over fresh SFT-pool demonstrations."""
    from edge.instruct.plan import format_plan
    from edge.instruct.prompt import model_input
    from edge.instruct.safety import clean_instruction
    from edge.instruct.slots import to_slots
    from training.rlhf.base_model import resolve_base
    from training.rlhf.corpus import CorpusGenerator
    from training.rlhf.model import chat_prompt_of, load_model, train_tokenizer
    from training.rlhf.tokens import encode_completion

    corpus = CorpusGenerator("sft", seed=5).examples(examples)
    slotted = [model_input(clean_instruction(e.instruction)[0], e.state, True) for e in corpus]
    plain = [format_plan(e.plan) for e in corpus]
    with_slots = [to_slots(p, i.numbers, i.kinds) for p, i in zip(plain, slotted, strict=True)]
    _, base = load_model(resolve_base("smollm2-135m-instruct"), device="cpu")
    scratch = train_tokenizer((t for i, p in zip(slotted, with_slots, strict=True) for t in (i.prompt, p)), 512)
    out = {}
    for name, tok in (("base", base), ("scratch", scratch)):
        for fmt, plans in (("slots", with_slots), ("plain", plain)):
            out[f"{name}_{fmt}"] = statistics.mean(len(encode_completion(tok, p)) for p in plans)
    chat = chat_prompt_of(base)
    prompts = [model_input(clean_instruction(e.instruction)[0], e.state, False, chat).prompt for e in corpus]
    out["base_prompt_chat"] = statistics.mean(len(base(p)["input_ids"]) for p in prompts)
    out["scratch_prompt_slots"] = statistics.mean(len(scratch(i.prompt)["input_ids"]) for i in slotted)
    return out


def _step_seconds(finetune: str, batch: int, steps: int, seed: int = 0) -> tuple[float, int, int]:
    """(mean seconds per step, padded sequence length, trainable parameters)."""
    import torch

    from training.rlhf.config import SFTConfig
    from training.rlhf.sft import prepare, sft_step, trainable

    config = SFTConfig(base="smollm2-135m-instruct", finetune=finetune, examples=256, device="cpu", seed=seed)
    model, tokenizer, data = prepare(config)
    optim = torch.optim.AdamW(trainable(model), lr=1e-5)
    rng = random.Random(seed)
    batches = [rng.sample(data, batch) for _ in range(steps + 1)]
    model.train()
    times = []
    for b in batches:
        t0 = time.perf_counter()
        sft_step(model, optim, b, tokenizer.pad_token_id)
        times.append(time.perf_counter() - t0)
    width = round(statistics.mean(max(len(ids) for ids, _ in b) for b in batches[1:]))
    return statistics.mean(times[1:]), width, sum(p.numel() for p in trainable(model))


def main() -> None:
    import torch

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="batch 4, 1 timed step, 200 examples for the token counts")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--steps", type=int, default=3)
    args = p.parse_args()
    batch, steps = (4, 1) if args.quick else (args.batch, args.steps)
    tokens = _token_counts(200 if args.quick else 1000)
    full_s, width, full_params = _step_seconds("full", batch, steps)
    lora_s, _, lora_params = _step_seconds("lora", batch, steps)
    load = os.getloadavg()[0]
    print(f"SFT step on smollm2-135m-instruct, batch {batch} x ~{width} tokens, mean of {steps} (load {load:.2f})")
    print(f"  full  {full_s:7.2f} s   {full_params:>12,} trainable parameters")
    print(f"  LoRA  {lora_s:7.2f} s   {lora_params:>12,} trainable parameters")
    print("mean tokens per plan (with end-of-sequence) and per prompt:")
    for k, v in tokens.items():
        print(f"  {k:18s} {v:6.1f}")
    print(
        json.dumps(
            {
                "bench": "rlhf_sft_step",
                "lora_step_s": round(lora_s, 2),
                "full_step_s": round(full_s, 2),
                "baseline": "full fine-tune",
                "ratio": round(full_s / lora_s, 2),
                "batch": batch,
                "seq_len": width,
                "tokens": {k: round(v, 1) for k, v in tokens.items()},
                "threads": torch.get_num_threads(),
                "load_1min": round(load, 2),
                "quick": args.quick,
            }
        )
    )


if __name__ == "__main__":
    main()
