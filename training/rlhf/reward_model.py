"""Stage 3, the reward model: a Bradley-Terry model trained on the stored preferences.

Entry point: `train_reward(RewardConfig(...))`. The reward is parameterised by a causal LM, as DPO's implicit
reward (Rafailov et al., 2023): r(x, y) = beta * (log pi_r(y | x) - log pi_sft(y | x)), summed over the plan's
tokens, where pi_r starts as a copy of the SFT model and pi_sft stays frozen. It is trained on (prompt, chosen,
rejected) with the Bradley-Terry loss -log sigmoid(r(chosen) - r(rejected)), TRL's RewardTrainer objective.
Why not a scalar head on the last token: with a few hundred preferences a fresh head on a small model ranked
held-out pairs at 53-66%, the log-ratio at 64-76% (docs/results/rlhf.md): it moves the very token probabilities that
differ between two plans (a digit of a duration, a sign). The reward model reads each plan with its totals
(distance, angle, time in the units of the cleaned instruction), so matching "go forward 2 m" means comparing
what both texts say, not multiplying; for a model with number slots, prompt, plan and totals are written with
slots, as the policy reads and writes them. A random held-out share of the pairs measures ranking accuracy.

`reference: none` drops pi_sft (r = beta * log pi_r(y | x), a uniform reference): the reward then starts as the SFT
model's own likelihood of the plan instead of 0, which ranks pairs well when the SFT model is good (the SmolLM2
SFT model: 78% untrained, docs/results/rlhf.md); with it `totals: false`, as the SFT model never learnt to write totals.

The output directory holds pi_r (a plain Hugging Face model directory), `reference/` (pi_sft, so the reward model
is self-contained; absent with `reference: none`) and rlhf_reward.json. `RewardScorer` scores plans for RL and
evaluation.
"""

from __future__ import annotations

import dataclasses
import json
import math
import random
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import torch
import torch.nn.functional as F

from edge.instruct.plan import PlanError, format_plan, parse_plan, plan_format_of, plan_metrics
from edge.instruct.prompt import ModelInput, chat_prompt, model_input
from edge.instruct.safety import clean_instruction
from edge.instruct.slots import fill_slots, slot_spans, to_slots, uses_number_slots
from training.errors import TrainingError
from training.rlhf.config import RewardConfig
from training.rlhf.model import load_model
from training.rlhf.prefs_store import Preference, PreferenceStore
from training.rlhf.tokens import completion_logprobs, encode_completion, length_sorted_chunks

REFERENCE = "reference"
INFO = "rlhf_reward.json"


class RewardScorer:
    """r(prompt, completion) = beta * (log pi_r - log pi_ref) of the completion, for batches of plans; without a
    reference model (None) r = beta * log pi_r. `totals`: the plans are read followed by their totals."""

    def __init__(self, model, reference, tokenizer, beta: float, batch_size: int = 16, totals: bool = True):
        self.model, self.reference, self.tokenizer = model, reference, tokenizer
        self.beta, self.batch_size, self.totals = beta, batch_size, totals
        self.number_slots = uses_number_slots(model.config)
        self.plan_format = plan_format_of(model.config)
        self.chat_prompt = chat_prompt(model.config)

    @classmethod
    def load(cls, model_dir: str | Path, device: str = "auto") -> RewardScorer:
        path = Path(model_dir)
        if not (path / INFO).is_file():
            raise TrainingError(f"{path} is not a reward model directory (no {INFO})")
        config = json.loads((path / INFO).read_text())["config"]
        reference = None
        if config.get("reference", "sft") == "sft":
            if not (path / REFERENCE / "config.json").is_file():
                raise TrainingError(f"{path} is not a reward model directory (no {REFERENCE}/)")
            reference = load_model(path / REFERENCE, device=device)[0].requires_grad_(False)
        model, tokenizer = load_model(path, device=device)
        beta, totals = float(config["beta"]), bool(config.get("totals", True))
        return cls(model.requires_grad_(False), reference, tokenizer, beta, totals=totals)

    def encode(self, inputs: Sequence[ModelInput], completions: Sequence[str]) -> tuple[list, list]:
        """Token ids of prompts and of completions written as the model writes them (with number slots if it
        uses them), each completion followed by its totals if the reward reads them."""
        tok = self.tokenizer
        texts = [with_totals(c, i) if self.totals else c for i, c in zip(inputs, completions, strict=True)]
        return [tok(i.prompt)["input_ids"] for i in inputs], [encode_completion(tok, t) for t in texts]

    def encode_plans(
        self, instructions: Sequence[str], states: Sequence[str | None], plans: Sequence[str]
    ) -> tuple[list, list]:
        """`encode` for plans written with plain numbers (stored preferences, planner outputs) answering screened
        instructions."""
        inputs = [
            model_input(i, s, self.number_slots, self.chat_prompt) for i, s in zip(instructions, states, strict=True)
        ]
        # stored plans are objects (field ratings, objects models' outputs): a model of another form reads its own
        written = (
            plans if self.plan_format == "objects" else [format_plan(parse_plan(p), self.plan_format) for p in plans]
        )
        return self.encode(inputs, [to_slots(p, i.numbers, i.kinds) for i, p in zip(inputs, written, strict=True)])

    def log_ratio(
        self,
        prompt_ids: Sequence[list[int]],
        completion_ids: Sequence[list[int]],
        reference_logp: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """beta * (log pi_r - log pi_ref) per sequence; gradients flow into pi_r unless disabled by the caller."""
        pad = self.tokenizer.pad_token_id
        logp, mask = completion_logprobs(self.model, prompt_ids, completion_ids, pad)
        if reference_logp is None:
            with torch.no_grad():
                reference_logp = self.reference_logp(prompt_ids, completion_ids)
        return self.beta * ((logp * mask).sum(1) - reference_logp)

    @torch.no_grad()
    def reference_logp(self, prompt_ids: Sequence[list[int]], completion_ids: Sequence[list[int]]) -> torch.Tensor:
        if self.reference is None:
            return torch.zeros(len(prompt_ids), device=self.model.device)
        logp, mask = completion_logprobs(self.reference, prompt_ids, completion_ids, self.tokenizer.pad_token_id)
        return (logp * mask).sum(1)

    @torch.no_grad()
    def score(self, inputs: Sequence[ModelInput], completions: Sequence[str]) -> list[float]:
        """Rewards of completions written as the model writes them (RL's samples)."""
        return self._score(self.encode(inputs, completions))

    @torch.no_grad()
    def score_plans(self, instructions: Sequence[str], states: Sequence[str | None], plans: Sequence[str]) -> list:
        """Rewards of plans written with plain numbers, answering screened instructions."""
        return self._score(self.encode_plans(instructions, states, plans))

    def _score(self, encoded: tuple[list, list]) -> list[float]:
        prompt_ids, completion_ids = encoded
        out = [0.0] * len(prompt_ids)
        lengths = [len(p) + len(c) for p, c in zip(prompt_ids, completion_ids, strict=True)]
        for part in length_sorted_chunks(lengths, self.batch_size):
            rewards = self.log_ratio([prompt_ids[k] for k in part], [completion_ids[k] for k in part])
            for k, r in zip(part, rewards.tolist(), strict=True):
                out[k] = r
        return out


def with_totals(completion: str, model_in: ModelInput) -> str:
    """The plan followed by what it adds up to, in the canonical units the instruction is written in after
    cleaning (m, rad, s), a total equal to one of the instruction's numbers written as its slot: the reward model
    then compares what it can read off both texts."""
    try:
        m = plan_metrics(parse_plan(fill_slots(completion, model_in.numbers)))
    except PlanError:
        return completion
    totals = f"totals: distance {m['distance_m']:.2f} m, angle {m['angle_rad']:.2f} rad, time {m['duration_s']:.2f} s"
    return f"{completion}\n{slot_spans(totals, model_in.numbers, model_in.kinds)}"


def _clean(p: Preference) -> str:
    return clean_instruction(p.instruction)[0]


def ranking_accuracy(scorer: RewardScorer, prefs: Sequence[Preference]) -> float:
    """Share of pairs whose chosen plan gets the higher reward (a tie counts as a miss)."""
    instructions, states = [_clean(p) for p in prefs], [p.state for p in prefs]
    chosen = scorer.score_plans(instructions, states, [p.chosen for p in prefs])
    rejected = scorer.score_plans(instructions, states, [p.rejected for p in prefs])
    return sum(c > r for c, r in zip(chosen, rejected, strict=True)) / max(1, len(prefs))


def split_preferences(prefs: Sequence[Preference], holdout: float, seed: int) -> tuple[list, list]:
    """(train, held-out): a random `holdout` share of the comparisons is never trained on. A comparison is an
    instruction and an unordered pair of plans, so one rated twice (the corpus repeats instructions) falls wholly
    on one side. Other comparisons of a held-out instruction may be in training (docs/results/rlhf.md also gives the
    accuracy on unseen instructions)."""

    def key(p: Preference) -> tuple:
        return p.instruction, p.state, *sorted((p.chosen, p.rejected))

    keys = sorted({key(p) for p in prefs})
    random.Random(seed).shuffle(keys)
    held = set(keys[: max(1, int(len(keys) * holdout))])
    return [p for p in prefs if key(p) not in held], [p for p in prefs if key(p) in held]


def train_reward(config: RewardConfig, on_step: Callable[[int, int, float], None] | None = None) -> dict:
    """Train, save to config.out and return stats (held-out ranking accuracy before and after training).
    `on_step(step, steps, loss)` follows progress."""
    start = time.perf_counter()
    prefs = PreferenceStore(config.db).preferences()
    if len(prefs) < 10:
        raise TrainingError(f"{config.db} holds {len(prefs)} preferences; the reward model needs at least 10")
    train, test = split_preferences(prefs, config.holdout, config.seed)

    torch.manual_seed(config.seed)
    model, tokenizer = load_model(config.model, device=config.device)
    reference = None
    if config.reference == "sft":
        reference = load_model(config.model, device=config.device)[0].requires_grad_(False)
    scorer = RewardScorer(model, reference, tokenizer, config.beta, totals=config.totals)
    before = ranking_accuracy(scorer, test)
    # each pair's reference log-probabilities, once
    rows = [scorer.encode_plans([_clean(p)] * 2, [p.state] * 2, [p.chosen, p.rejected]) for p in train]
    ref = [scorer.reference_logp(*r) for r in rows]
    optim = torch.optim.AdamW(model.parameters(), lr=config.learning_rate)
    rng = random.Random(config.seed)
    order = list(range(len(train)))
    pair_tokens = [len(r[0][0]) + max(map(len, r[1])) for r in rows]
    model.train()
    step, loss_value = 0, float("nan")
    steps = config.epochs * math.ceil(len(order) / config.batch_size)
    for _ in range(config.epochs):
        rng.shuffle(order)
        for i in range(0, len(order), config.batch_size):
            batch = order[i : i + config.batch_size]
            optim.zero_grad()
            loss_value = 0.0
            # the batch's mean loss, in parts (memory) of similar lengths: their sum, in any order
            for part in length_sorted_chunks(pair_tokens, config.micro_batch_size, batch):
                prompt_ids = [rows[k][0][j] for j in (0, 1) for k in part]  # chosen first, then rejected
                completion_ids = [rows[k][1][j] for j in (0, 1) for k in part]
                reference_logp = torch.cat([torch.stack([ref[k][j] for k in part]) for j in (0, 1)])
                rewards = scorer.log_ratio(prompt_ids, completion_ids, reference_logp)
                loss = -F.logsigmoid(rewards[: len(part)] - rewards[len(part) :]).sum() / len(batch)
                loss.backward()
                loss_value += loss.item()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optim.step()
            step += 1
            if on_step:
                on_step(step, steps, loss_value)
    model.eval()
    stats = {
        "pairs_train": len(train),
        "pairs_heldout": len(test),
        "final_loss": loss_value,
        "heldout_accuracy_before": before,
        "heldout_accuracy": ranking_accuracy(scorer, test),
        "train_seconds": round(time.perf_counter() - start, 1),
    }
    save_reward_model(config.out, model, reference, tokenizer, {"config": dataclasses.asdict(config), "stats": stats})
    return stats


def save_reward_model(out: str | Path, model, reference, tokenizer, info: dict) -> None:
    """pi_r, reference/ (unless `reference` is None) and rlhf_reward.json (`info["config"]["beta"]` is the reward's
    scale). With model = reference the reward is 0 everywhere: the untrained reward model (benchmarks use it)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for directory, m in ((out, model), (out / REFERENCE, reference)):
        if m is None:
            continue
        m.save_pretrained(directory)
        tokenizer.save_pretrained(directory)
    (out / INFO).write_text(json.dumps(info, indent=2))
