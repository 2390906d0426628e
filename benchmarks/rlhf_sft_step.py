"""SFT on the pretrained base: seconds per optimiser step of each way to make it cheap (a full fine-tune, LoRA
(peft), only the top decoder layers; the chat template's prompt or the plain one), on real demonstrations padded to
the batch's longest, in one run; and what the number format and the prompt cost in tokens under the base's tokenizer
and the scratch model's.

    python -m benchmarks.rlhf_sft_step [--quick] [--batch 8] [--steps 3]

Each variant runs one warm-up step, then `--steps` timed ones (the mean is reported), on the same draw of
demonstrations. The last line is the JSON figure: each variant's step time against the full fine-tune on the chat
prompt (the anchor, measured beside them).
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
    arrays = [format_plan(e.plan, "arrays") for e in corpus]
    with_slots = [to_slots(p, i.numbers, i.kinds) for p, i in zip(plain, slotted, strict=True)]
    _, base = load_model(resolve_base("smollm2-135m-instruct"), device="cpu")
    scratch = train_tokenizer((t for i, p in zip(slotted, with_slots, strict=True) for t in (i.prompt, p)), 512)
    out = {}
    for name, tok in (("base", base), ("scratch", scratch)):
        for fmt, plans in (("slots", with_slots), ("plain", plain), ("arrays", arrays)):
            out[f"{name}_{fmt}"] = statistics.mean(len(encode_completion(tok, p)) for p in plans)
    chat = chat_prompt_of(base)
    prompts = [model_input(clean_instruction(e.instruction)[0], e.state, False, chat).prompt for e in corpus]
    out["base_prompt_chat"] = statistics.mean(len(base(p)["input_ids"]) for p in prompts)
    plain_prompts = [model_input(clean_instruction(e.instruction)[0], e.state, False).prompt for e in corpus]
    out["base_prompt_plain"] = statistics.mean(len(base(p)["input_ids"]) for p in plain_prompts)
    out["scratch_prompt_slots"] = statistics.mean(len(scratch(i.prompt)["input_ids"]) for i in slotted)
    return out


# (name, SFTConfig settings): the anchor first
VARIANTS = (
    ("full, chat prompt", {"finetune": "full"}),
    ("LoRA r16, chat prompt", {"finetune": "lora"}),
    ("full, plain prompt", {"finetune": "full", "chat_template": False}),
    ("LoRA r16, plain prompt", {"finetune": "lora", "chat_template": False}),
    ("top 8 layers, plain prompt", {"finetune": "top", "top_layers": 8, "chat_template": False}),
    ("top 4 layers, plain prompt", {"finetune": "top", "top_layers": 4, "chat_template": False}),
    (
        "top 4 layers, plain, arrays",
        {"finetune": "top", "top_layers": 4, "chat_template": False, "plan_format": "arrays"},
    ),
)


def _step_seconds(settings: dict, batch: int, steps: int, seed: int = 0) -> tuple[float, int, int]:
    """(mean seconds per step, padded sequence length, trainable parameters)."""
    import torch

    from training.rlhf.config import SFTConfig
    from training.rlhf.sft import prepare, sft_step, trainable

    config = SFTConfig(base="smollm2-135m-instruct", examples=256, device="cpu", seed=seed, **settings)
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
    loads = [os.getloadavg()[0]]
    rows = []
    for name, settings in VARIANTS:
        rows.append((name, *_step_seconds(settings, batch, steps)))
        loads.append(os.getloadavg()[0])
    anchor = rows[0][1]
    load = f"load {min(loads):.2f}-{max(loads):.2f}"
    print(f"SFT step on smollm2-135m-instruct, batch {batch}, mean of {steps} after a warm-up ({load})")
    print(f"  {'variant':28s} {'s/step':>7s} {'vs anchor':>9s} {'tokens':>6s} {'trainable':>13s}")
    for name, seconds, width, params in rows:
        print(f"  {name:28s} {seconds:7.2f} {anchor / seconds:8.2f}x {width:6d} {params:>13,}")
    print("mean tokens per plan (with end-of-sequence) and per prompt:")
    for k, v in tokens.items():
        print(f"  {k:18s} {v:6.1f}")
    print(
        json.dumps(
            {
                "bench": "rlhf_sft_step",
                "baseline": rows[0][0],
                "baseline_step_s": round(anchor, 2),
                "variants": {
                    name: {"step_s": round(sec, 2), "ratio": round(anchor / sec, 2), "seq_len": w, "trainable": p}
                    for name, sec, w, p in rows
                },
                "batch": batch,
                "tokens": {k: round(v, 1) for k, v in tokens.items()},
                "threads": torch.get_num_threads(),
                "load_1min": [round(x, 2) for x in loads],
                "quick": args.quick,
            }
        )
    )


if __name__ == "__main__":
    main()
