"""Stage 1, supervised fine-tuning: tokenizer, model and training on the generated demonstrations.

Entry point: `train_sft(SFTConfig(...))`. The loss covers the completion (plan + end-of-sequence) only. The
output directory is a plain Hugging Face model directory (config, safetensors, tokenizer) plus rlhf_sft.json
with the config and the measured JSON validity and intent accuracy on fresh corpus examples.
"""

from __future__ import annotations

import dataclasses
import json
import math
import random
import time
from collections.abc import Callable
from pathlib import Path

import torch

from edge.instruct.plan import format_plan
from edge.instruct.prompt import model_input
from edge.instruct.safety import clean_instruction
from edge.instruct.slots import to_slots
from training.errors import ConfigError
from training.rlhf.config import SFTConfig
from training.rlhf.corpus import CorpusGenerator
from training.rlhf.limits import limits_for
from training.rlhf.model import new_model, train_tokenizer
from training.rlhf.tokens import encode_completion, pad_right


def train_sft(config: SFTConfig, on_step: Callable[[int, float], None] | None = None) -> dict:
    """Train and save the SFT model to config.out; returns the stats also written to rlhf_sft.json.
    `on_step(step, loss)` follows progress; validation intent accuracy on fresh examples of the same pool (never
    the held-out set) is recorded every `eval_every` steps."""
    from training.rlhf.evaluate import corpus_items, evaluate, summarize
    from training.rlhf.generation import HFGenerator

    start = time.perf_counter()
    limits = limits_for(config.robot)
    examples = CorpusGenerator("sft", limits, seed=config.seed).examples(config.examples)
    inputs = [
        model_input(clean_instruction(e.instruction)[0], e.state, number_slots=True)  # as the planner will
        for e in examples
    ]
    prompts = [i.prompt for i in inputs]
    plans = [to_slots(format_plan(e.plan), i.numbers, i.kinds) for e, i in zip(examples, inputs, strict=True)]
    tokenizer = train_tokenizer((t for pair in zip(prompts, plans, strict=True) for t in pair), config.model.vocab_size)
    model = new_model(tokenizer, config.model, seed=config.seed)

    data = []
    for prompt, plan in zip(prompts, plans, strict=True):
        p, c = tokenizer(prompt)["input_ids"], encode_completion(tokenizer, plan)
        data.append((p + c, [-100] * len(p) + c))
    too_long = max(len(ids) for ids, _ in data)
    if too_long > config.model.max_positions:
        raise ConfigError(f"an example has {too_long} tokens, more than model.max_positions")

    optim = torch.optim.AdamW(model.parameters(), lr=config.learning_rate, weight_decay=config.weight_decay)
    sched = torch.optim.lr_scheduler.LambdaLR(optim, lambda s: _lr_factor(s, config.warmup_steps, config.steps))
    rng = random.Random(config.seed)
    items = corpus_items("sft", limits, config.eval_examples, seed=config.seed + 1000)
    curve = []
    model.train()
    loss_value = math.nan
    for step in range(config.steps):
        batch = rng.sample(data, config.batch_size)
        ids, attn = pad_right([b[0] for b in batch], tokenizer.pad_token_id)
        labels, _ = pad_right([b[1] for b in batch], -100)
        loss = model(input_ids=ids, attention_mask=attn, labels=labels).loss
        optim.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optim.step()
        sched.step()
        loss_value = loss.item()
        if on_step:
            on_step(step + 1, loss_value)
        if config.eval_every and (step + 1) % config.eval_every == 0 and step + 1 < config.steps:
            model.eval()
            accuracy = summarize(evaluate(HFGenerator(model, tokenizer), items, limits))["intent_accuracy"]
            curve.append([step + 1, accuracy])
            model.train()
    train_s = time.perf_counter() - start

    model.eval()
    generator = HFGenerator(model, tokenizer)
    summary = summarize(evaluate(generator, items, limits, constrained=False))
    curve.append([config.steps, summarize(evaluate(generator, items, limits))["intent_accuracy"]])
    stats = {
        "final_loss": loss_value,
        "train_seconds": round(train_s, 1),
        "examples": len(data),
        "parameters": sum(p.numel() for p in model.parameters()),
        "vocab": len(tokenizer),
        "fresh_sft_examples_unconstrained": summary,
        "validation_accuracy_curve": curve,
    }
    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    (out / "rlhf_sft.json").write_text(json.dumps({"config": dataclasses.asdict(config), "stats": stats}, indent=2))
    return stats


def _lr_factor(step: int, warmup: int, total: int) -> float:
    if step < warmup:
        return (step + 1) / warmup
    return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * (step - warmup) / max(1, total - warmup)))
