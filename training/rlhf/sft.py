"""Stage 1, supervised fine-tuning on the generated demonstrations, from scratch or from a pretrained base.

Entry point: `train_sft(SFTConfig(...))`. `base` scratch trains a tokenizer and a small model (model.py) from
nothing; a pretrained base (base_model.py) is fine-tuned in full or with LoRA adapters (peft), reading its prompts
in its own chat template. The loss covers the completion (plan + end-of-sequence) only. The output directory is a
plain Hugging Face model directory (config, safetensors, tokenizer; LoRA adapters merged into the weights) plus
rlhf_sft.json with the config and the measured JSON validity and intent accuracy on fresh corpus examples.
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
from edge.instruct.prompt import chat_prompt, model_input
from edge.instruct.safety import clean_instruction
from edge.instruct.slots import to_slots, uses_number_slots
from training.errors import ConfigError
from training.rlhf.base_model import resolve_base
from training.rlhf.config import SFTConfig
from training.rlhf.corpus import CorpusGenerator
from training.rlhf.limits import limits_for
from training.rlhf.model import chat_prompt_of, load_model, new_model, torch_device, train_tokenizer
from training.rlhf.tokens import encode_completion, length_grouped_batches, pad_right

Demonstration = tuple[list[int], list[int]]  # (prompt + completion ids, labels: -100 over the prompt)


def prepare(config: SFTConfig) -> tuple[torch.nn.Module, object, list[Demonstration]]:
    """(model to train, tokenizer, encoded demonstrations): the scratch model with its new tokenizer, or the base
    (LoRA-wrapped for finetune lora) with its own; on config.device."""
    base = resolve_base(config.base)
    if base is None and config.finetune != "full":
        raise ConfigError(
            f"finetune {config.finetune} needs a pretrained base (--base); a scratch model is trained in full"
        )
    examples = CorpusGenerator("sft", limits_for(config.robot), seed=config.seed).examples(config.examples)
    slots = config.number_slots == "slots" or (config.number_slots == "auto" and base is None)
    if slots and config.plan_format != "objects":
        raise ConfigError(f"plan_format {config.plan_format} needs plain numbers (number_slots plain)")
    if base is None:
        chat = tokenizer = model = None
    else:
        model, tokenizer = load_model(base, device="cpu")
        # a model fine-tuned before keeps the prompt it learnt
        chat = chat_prompt(model.config) or (
            chat_prompt_of(tokenizer, config.system_prompt) if config.chat_template else None
        )
        model.config.number_slots = slots
        model.config.chat_prompt = chat
    inputs = [
        model_input(clean_instruction(e.instruction)[0], e.state, slots, chat)  # as the planner will
        for e in examples
    ]
    prompts = [i.prompt for i in inputs]
    plans = [
        to_slots(format_plan(e.plan), i.numbers, i.kinds) if slots else format_plan(e.plan, config.plan_format)
        for e, i in zip(examples, inputs, strict=True)
    ]
    if model is None:
        pairs = (t for pair in zip(prompts, plans, strict=True) for t in pair)
        tokenizer = train_tokenizer(pairs, config.model.vocab_size)
        model = new_model(tokenizer, config.model, seed=config.seed, number_slots=slots)
    model.config.plan_format = config.plan_format
    data = []
    for prompt, plan in zip(prompts, plans, strict=True):
        p, c = tokenizer(prompt)["input_ids"], encode_completion(tokenizer, plan)
        data.append((p + c, [-100] * len(p) + c))
    too_long = max(len(ids) for ids, _ in data)
    if too_long > model.config.max_position_embeddings:
        raise ConfigError(
            f"an example has {too_long} tokens, more than the model's {model.config.max_position_embeddings} positions"
        )
    if config.finetune == "top":
        freeze_below(model, config.top_layers)
    if config.finetune == "lora":
        from peft import LoraConfig, get_peft_model

        lora = config.lora
        model = get_peft_model(
            model,
            LoraConfig(
                r=lora.r,
                lora_alpha=lora.alpha,
                lora_dropout=lora.dropout,
                target_modules=list(lora.target_modules),
                task_type="CAUSAL_LM",
            ),
        )
    return model.to(torch_device(config.device)), tokenizer, data


def freeze_below(model, top_layers: int) -> None:
    """Train only the top `top_layers` decoder layers and the final norm: the embeddings (tied to the output layer
    in SmolLM2) and every layer below keep their weights, and autograd stops at the lowest trained layer."""
    layers = model.get_decoder().layers
    if top_layers > len(layers):
        raise ConfigError(f"top_layers {top_layers}: the model has {len(layers)} decoder layers")
    model.requires_grad_(False)
    for module in (*layers[len(layers) - top_layers :], model.get_decoder().norm):
        module.requires_grad_(True)


def completion_loss(model, ids: torch.Tensor, attn: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over the completion tokens, with the output layer applied at those positions only: the
    prompt's positions (over half a demonstration) never pay for the vocabulary-wide logits (49k on SmolLM2)."""
    lm = model.get_base_model() if hasattr(model, "get_base_model") else model  # through a peft wrapper
    hidden = lm.get_decoder()(input_ids=ids, attention_mask=attn).last_hidden_state
    target = labels[:, 1:]
    at = target != -100
    logits = lm.get_output_embeddings()(hidden[:, :-1][at])
    return torch.nn.functional.cross_entropy(logits.float(), target[at])


def sft_step(model, optim, batch: list[Demonstration], pad: int) -> float:
    """One optimiser step on a batch of demonstrations; returns the loss."""
    ids, attn = pad_right([b[0] for b in batch], pad)
    labels, _ = pad_right([b[1] for b in batch], -100)
    device = model.device
    loss = completion_loss(model, ids.to(device), attn.to(device), labels.to(device))
    optim.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(trainable(model), 1.0)
    optim.step()
    return loss.item()


def trainable(model) -> list[torch.nn.Parameter]:
    return [p for p in model.parameters() if p.requires_grad]


def merged(model):
    """The plain model to save: LoRA adapters folded into the weights (a full fine-tune is returned as it is)."""
    return model.merge_and_unload() if hasattr(model, "merge_and_unload") else model


def train_sft(config: SFTConfig, on_step: Callable[[int, float], None] | None = None) -> dict:
    """Train and save the SFT model to config.out; returns the stats also written to rlhf_sft.json.
    `on_step(step, loss)` follows progress; validation intent accuracy on fresh examples of the same pool (never
    the held-out set) is recorded every `eval_every` steps."""
    from training.rlhf.evaluate import corpus_items, evaluate, summarize
    from training.rlhf.generation import HFGenerator

    start = time.perf_counter()
    limits = limits_for(config.robot)
    model, tokenizer, data = prepare(config)
    optim = torch.optim.AdamW(trainable(model), lr=config.learning_rate, weight_decay=config.weight_decay)
    sched = torch.optim.lr_scheduler.LambdaLR(optim, lambda s: _lr_factor(s, config.warmup_steps, config.steps))
    rng = random.Random(config.seed)
    items = corpus_items("sft", limits, config.eval_examples, seed=config.seed + 1000)
    curve = []
    model.train()
    loss_value = math.nan
    batches = length_grouped_batches([len(ids) for ids, _ in data], config.batch_size, rng)
    for step in range(config.steps):
        loss_value = sft_step(model, optim, [data[k] for k in next(batches)], tokenizer.pad_token_id)
        sched.step()
        if on_step:
            on_step(step + 1, loss_value)
        if config.eval_every and (step + 1) % config.eval_every == 0 and step + 1 < config.steps:
            model.eval()
            accuracy = summarize(evaluate(HFGenerator(model, tokenizer), items, limits))["intent_accuracy"]
            curve.append([step + 1, accuracy])
            model.train()
    train_s = time.perf_counter() - start

    model = merged(model).eval()
    generator = HFGenerator(model, tokenizer)
    summary = summarize(evaluate(generator, items, limits, constrained=False))
    curve.append([config.steps, summarize(evaluate(generator, items, limits))["intent_accuracy"]])
    stats = {
        "final_loss": loss_value,
        "train_seconds": round(train_s, 1),
        "examples": len(data),
        "torch_threads": torch.get_num_threads(),  # what train_seconds was measured with
        "parameters": sum(p.numel() for p in model.parameters()),
        "vocab": len(tokenizer),
        "number_slots": uses_number_slots(model.config),
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
