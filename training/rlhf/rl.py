"""Stage 4, RL fine-tuning with GRPO; vLLM generates the samples.

Entry point: `RLTrainer(RLConfig(...)).train()`. Each iteration (`step`):
  1. generate: the engine samples `samples_per_prompt` plans (unconstrained, so JSON validity is learnt) for
     `prompts_per_iteration` instructions from the `rl` pool;
  2. reward: rm_weight * (reward model, standardised over the batch) + sim_weight * (intent score of the plan
     executed in the twin) - json_weight * (not a plan) - kl_coef * (log pi - log pi_sft summed over the plan);
     with `explore_samples`, a group whose best plan scores below `explore_below` in the twin samples that many more,
     and the best of them joins the group if it beats the group's best (a plan the policy rarely writes then gets an
     advantage at all);
  3. advantages relative to each prompt's group (no critic), by `advantage`: grpo or dr_grpo
     (training.rlhf.advantages says how they differ);
  4. update: `epochs` policy-gradient steps on the PPO-clipped token loss -min(rA, clip(r, 1 - clip, 1 + clip)A),
     r = pi/pi_old (training.rlhf.loss);
  5. sync: save_pretrained into a directory under `sync_dir`, then the running engine reloads it.
Steps 1-2 collect a `Rollout`; `mode: async` collects the next one in a background thread during steps 3-4
(training.rlhf.overlap), and the update then corrects for the older weights that sampled it (decoupled PPO).
Every `validate_every` iterations (and at the start: the SFT model; 0: never) the engine plans the validation split
greedily (constrained, as deployed); the best checkpoint on it is what RL writes, a tie going to the earlier one (so
a run that never beats SFT writes the SFT weights). The held-out set is never used here. The split goes into the
output as validation.jsonl, so the pipeline's gate judges on the same lines.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import torch

from edge.instruct.generator import MAX_NEW_TOKENS
from edge.instruct.plan import STOP, PlanError, parse_plan
from edge.instruct.prompt import chat_prompt, model_input
from edge.instruct.safety import clamp_plan, screen_instruction
from edge.instruct.slots import fill_slots, uses_number_slots
from training.errors import ConfigError
from training.rlhf.advantages import group_advantages, loss_normaliser
from training.rlhf.config import ENGINES, RLConfig
from training.rlhf.corpus import CorpusGenerator
from training.rlhf.evaluate import corpus_items, evaluate, summarize, write_eval_set
from training.rlhf.execution import TwinExecutor
from training.rlhf.generation import HFGenerator
from training.rlhf.limits import limits_for
from training.rlhf.loss import ppo_token_loss
from training.rlhf.model import load_model
from training.rlhf.operator import score_execution
from training.rlhf.reward_model import RewardScorer
from training.rlhf.tokens import completion_logprobs, length_sorted_chunks, place_completion_values

VALIDATION_FILE = "validation.jsonl"
EXPLORE_SEED = 1_000_003  # exploration samples draw from another stream than the group's


@dataclasses.dataclass(frozen=True)
class Scores:
    """The terms of each sample's reward that the policy's forward passes do not give, flat in group order."""

    valid: torch.Tensor  # 1.0 where the text is a plan
    sim: torch.Tensor  # intent score of the plan executed in the twin (0 for text that is not a plan)
    rm: torch.Tensor  # the reward model's score


@dataclasses.dataclass
class Rollout:
    """One batch of samples and the reward terms the policy's forward passes do not give: what steps 1-2 collect
    before the update that reads it (in async mode, in the background during the update before)."""

    index: int  # the batch's number, which seeds its sampling
    inputs: list
    groups: list[list]
    scores: Scores
    explored: int  # groups with no plan scoring explore_below
    found: int  # of them, groups an exploration sample joined
    version: int  # the updates the engine's weights had seen when it generated the batch
    seconds: dict[str, float]  # generation, reward
    span: tuple[float, float]  # perf_counter at the start and the end of collecting it
    overlapped: float = 0.0  # seconds of collecting it that ran during an update (async)

    @property
    def samples(self) -> int:
        return sum(len(group) for group in self.groups)


@dataclasses.dataclass(frozen=True)
class Batch:
    """An iteration's samples as the update reads them: one row (prompt token ids, plan token ids) per sample in
    group order, cut into micro-batches (`parts`: row indices; `chunks`: their rows)."""

    rows: list[tuple[list[int], list[int]]]
    parts: list[list[int]]
    chunks: list[list[tuple[list[int], list[int]]]]
    old: list[tuple[torch.Tensor, torch.Tensor]]  # per micro-batch: the policy's token log-probs before the update
    # (pi_old; the decoupled loss's pi_prox), plan mask
    kl: torch.Tensor  # per sample: log pi - log pi_sft summed over the plan
    # async: per micro-batch, the token log-probs of the engine's weights that sampled them (pi_behaviour)
    behaviour: list[torch.Tensor] | None = None


@contextlib.contextmanager
def _timed(times: dict[str, float], phase: str) -> Iterator[None]:
    """Add the block's wall time to times[phase]: exploration adds its sampling and judging to the phases'."""
    t0 = time.perf_counter()
    yield
    times[phase] = times.get(phase, 0.0) + time.perf_counter() - t0


class RLTrainer:
    def __init__(self, config: RLConfig, engine=None):
        """`engine`: a running engine to use (it gets the SFT weights first); by default config.engine says which:
        this process's shared vLLM engine, vLLM Ray actors, or transformers on the policy itself."""
        transformers = isinstance(engine, HFGenerator) or (engine is None and config.engine == "transformers")
        if config.mode == "async" and transformers:
            raise ConfigError("mode async needs the vllm engine: transformers samples the policy the update changes")
        self.config = config
        self.policy, self.tokenizer = load_model(config.model, device=config.device)
        self.number_slots = uses_number_slots(self.policy.config)
        self.chat_prompt = chat_prompt(self.policy.config)
        self.reference, _ = load_model(config.model, device=config.device)
        self.reference.requires_grad_(False)
        self.scorer = RewardScorer.load(config.reward_model, device=config.device)
        self.limits = limits_for(config.robot)
        self.executor = TwinExecutor(config.robot, policy=config.policy)
        self.corpus = CorpusGenerator(config.pool, self.limits, seed=config.seed)
        self.optim = torch.optim.AdamW(self.policy.parameters(), lr=config.learning_rate, weight_decay=0.0)
        self.sync_dir = Path(tempfile.mkdtemp(prefix="rlhf-weights-", dir=config.sync_dir))
        self.history: list[dict] = []
        self.version = 0  # updates applied to the policy
        self.engine_version = 0  # updates applied to the weights the engine holds
        self.validation = corpus_items(
            config.validation_pool, self.limits, config.validation_examples, config.validation_seed
        )
        self.validation_history: list[dict] = []
        self.owns_engine = engine is None  # close() stops the Ray engines it started, never a shared engine
        if engine is not None:
            self.engine = engine
            self.sync()  # the engine may hold another model's weights
        else:
            self.engine = self._make_engine()
        self.overlap = None
        if config.mode == "async":
            from training.rlhf.overlap import RolloutAhead

            self.overlap = RolloutAhead(self)

    def _make_engine(self):
        c = self.config
        if c.engine not in ENGINES:
            raise ConfigError(f"engine must be one of {', '.join(ENGINES)}, got {c.engine!r}")
        if c.engine == "transformers":
            return HFGenerator(self.policy, self.tokenizer)
        from training.rlhf.engine import RayVLLMEngines, shared_engine

        if c.ray_engines > 0:
            return RayVLLMEngines(
                c.model,
                num_engines=c.ray_engines,
                seed=c.seed,
                device=c.ray_engine_device,
                cpus=c.ray_engine_cpus,
                address=c.ray_address,
            )
        return shared_engine(c.model, seed=c.seed)

    def step(self, iteration: int) -> dict:
        """One iteration, in the order rsl_rl's runner reads: generate, reward, advantages, update, then sync (async:
        training.rlhf.overlap.RolloutAhead.step)."""
        if self.overlap is not None:
            return self.overlap.step(iteration)
        stats, _ = self.learn(iteration, self.collect(iteration))
        return self.finish(stats)

    def collect(self, index: int) -> Rollout:
        """Steps 1-2 for batch `index` (it seeds the sampling): sample it from the engine's weights, judge it in the
        twin (exploring where configured) and score it with the reward model."""
        version, times = self.engine_version, {}
        began = time.perf_counter()
        with _timed(times, "generation"):
            examples, inputs, groups = self.generate(index)
        with _timed(times, "reward"):
            judged = self._judge(examples, inputs, groups)
        explored, found = self._explore(index, examples, inputs, groups, judged, times)
        with _timed(times, "reward"):
            scores = self._score(inputs, groups, judged)
        return Rollout(index, inputs, groups, scores, explored, found, version, times, (began, time.perf_counter()))

    def learn(self, iteration: int, rollout: Rollout) -> tuple[dict, tuple[float, float]]:
        """Steps 3-4 on a rollout: advantages and the update (the policy's version goes up by one). The iteration's
        stats (seconds so far: the rollout's and the update's) and the update's perf_counter start and end."""
        c = self.config
        times = dict(rollout.seconds)
        began = time.perf_counter()
        with _timed(times, "training"):  # the KL term needs the policy's forward passes, so it is timed as training
            batch = self._batch([i.prompt for i in rollout.inputs], rollout.groups)
            reward = self.reward(rollout.scores, batch.kl)
            adv = group_advantages(reward, [len(g) for g in rollout.groups], c.advantage)
            plan_tokens = [len(plan) for _, plan in batch.rows]
            grad_norm = self.update(batch, adv, loss_normaliser(plan_tokens, c.advantage, MAX_NEW_TOKENS))
        self.version += 1
        stats = {
            "iteration": iteration,
            "reward": reward.mean().item(),
            "sim_score": rollout.scores.sim.mean().item(),
            "json_valid": rollout.scores.valid.mean().item(),
            "kl": batch.kl.mean().item(),
            "samples": len(batch.rows),
            "explored": rollout.explored,
            "found": rollout.found,
            "grad_norm": grad_norm,
            "tokens": sum(plan_tokens),
            "seconds": times,
        }
        return stats, (began, time.perf_counter())

    def finish(self, stats: dict) -> dict:
        """Step 5: sync the weights into the engine (timed into the stats' seconds); the iteration goes into the
        history."""
        with _timed(stats["seconds"], "sync"):
            self.sync()
        stats["seconds"] = {k: round(v, 3) for k, v in stats["seconds"].items()}
        self.history.append(stats)
        return stats

    def generate(self, iteration: int) -> tuple[list, list, list[list]]:
        """This iteration's corpus examples, the policy's input for each, and `samples_per_prompt` plans per input
        (a group; exploration may add one to it later)."""
        c = self.config
        examples = self.corpus.examples(c.prompts_per_iteration)
        inputs = self.model_inputs(examples)
        return examples, inputs, self._sample([i.prompt for i in inputs], c.samples_per_prompt, c.seed + iteration)

    def reward(self, scores: Scores, kl: torch.Tensor) -> torch.Tensor:
        """Each sample's reward: the reward model standardised over the batch, the twin's intent score, the cost of
        text that is not a plan and the KL penalty, weighted as configured."""
        c = self.config
        rm_z = (scores.rm - scores.rm.mean()) / (scores.rm.std() + 1e-6)
        return c.rm_weight * rm_z + c.sim_weight * scores.sim - c.json_weight * (1 - scores.valid) - c.kl_coef * kl

    def update(self, batch: Batch, adv: torch.Tensor, normaliser: int) -> float:
        """`epochs` steps on the PPO-clipped token loss, summed over the micro-batches and divided by `normaliser`;
        the gradient norm of the last step (before clipping)."""
        c = self.config
        behaviour = batch.behaviour or [None] * len(batch.parts)  # sync: the proximal policy sampled the batch
        micro = list(zip(batch.parts, batch.chunks, batch.old, behaviour, strict=True))
        self.policy.train()
        for _ in range(c.epochs):  # PPO-style clipped updates reuse each batch of samples (the twin is the cost)
            self.optim.zero_grad()
            for part, chunk, (old_logp, mask), behav in micro:
                logp, _ = self._logprobs(self.policy, chunk)
                loss = ppo_token_loss(logp, old_logp, adv[part, None], c.clip, behav, c.behaviour_ratio_cap)
                ((loss * mask).sum() / normaliser).backward()
            grad_norm = torch.nn.utils.clip_grad_norm_(self.policy.parameters(), c.max_grad_norm)
            self.optim.step()
        self.policy.eval()
        return float(grad_norm)

    def model_inputs(self, examples: list) -> list:
        """The policy's input for each corpus example: its instruction screened as the robot screens it."""
        return [
            model_input(screen_instruction(e.instruction, self.limits)[0], e.state, self.number_slots, self.chat_prompt)
            for e in examples
        ]

    def _sample(self, prompts: list[str], n: int, seed: int) -> list[list]:
        """n plans per prompt, sampled without the grammar (RL learns JSON validity) at the configured temperature."""
        temperature = self.config.temperature
        out = self.engine.generate(prompts, n=n, temperature=temperature, constrained=False, seed=seed)
        return [list(group) for group in out]

    def _judge(self, examples: list, inputs: list, groups: list[list]) -> list[list[tuple[float, float]]]:
        """(valid JSON, intent score of the plan executed in the twin) of each sample, per group; text that is not a
        plan scores 0 and executes as STOP."""
        flat = [(i, s) for i, group in enumerate(groups) for s in group]
        valid, plans = [], []
        for i, s in flat:
            try:
                plans.append(clamp_plan(parse_plan(fill_slots(s.text, inputs[i].numbers)), self.limits)[0])
                valid.append(1.0)
            except PlanError:
                plans.append(STOP)
                valid.append(0.0)
        runs = self.executor.execute(plans)
        scores = iter(
            (v, score_execution(run, examples[i].expect, examples[i].steps) * v)
            for (i, _), run, v in zip(flat, runs, valid, strict=True)
        )
        return [[next(scores) for _ in group] for group in groups]

    def _explore(self, iteration: int, examples: list, inputs: list, groups: list, judged: list, times: dict):
        """For each group whose best plan scores below `explore_below`, sample `explore_samples` more plans and add
        the best of them to the group if it beats the group's best: a plan the policy rarely writes (a slow speed
        for a word SFT never saw) then gets an advantage at all. Returns (groups explored, groups extended)."""
        c = self.config
        if not c.explore_samples:
            return 0, 0
        best_score = [max(score for _, score in scored) for scored in judged]
        failing = [i for i, score in enumerate(best_score) if score < c.explore_below]
        if not failing:
            return 0, 0
        with _timed(times, "generation"):
            prompts = [inputs[i].prompt for i in failing]
            extra = self._sample(prompts, c.explore_samples, c.seed + iteration + EXPLORE_SEED)
        with _timed(times, "reward"):
            extra_judged = self._judge([examples[i] for i in failing], [inputs[i] for i in failing], extra)
        found = 0
        for i, samples, scored in zip(failing, extra, extra_judged, strict=True):
            best = max(range(len(samples)), key=lambda k: scored[k][1])
            if scored[best][1] > best_score[i]:
                groups[i].append(samples[best])
                judged[i].append(scored[best])
                found += 1
        return len(failing), found

    def _score(self, inputs: list, groups: list[list], judged: list[list[tuple[float, float]]]) -> Scores:
        """The judged terms of each sample's reward, flat in group order, with the reward model's score added."""
        flat = [(i, s) for i, group in enumerate(groups) for s in group]
        return Scores(
            valid=torch.tensor([v for group in judged for v, _ in group]),
            sim=torch.tensor([score for group in judged for _, score in group]),
            rm=torch.tensor(self.scorer.score([inputs[i] for i, _ in flat], [s.text for _, s in flat])),
        )

    def _batch(self, prompts: list[str], groups: list[list]) -> Batch:
        """The samples as the update reads them, with the log-probabilities they were sampled with and their KL."""
        tok = self.tokenizer
        prompt_ids = [tok(p)["input_ids"] for p in prompts]
        samples = [(i, s) for i, group in enumerate(groups) for s in group]
        rows = [(prompt_ids[i], s.token_ids or [tok.eos_token_id]) for i, s in samples]
        # micro-batches of similar lengths pad less; the update sums over them, so their order does not matter
        parts = length_sorted_chunks([len(prompt) + len(plan) for prompt, plan in rows], self.config.micro_batch_size)
        chunks = [[rows[k] for k in part] for part in parts]
        with torch.no_grad():  # the sampling policy's log-probabilities (ratio denominators) and the KL to SFT
            old = [self._logprobs(self.policy, chunk) for chunk in chunks]
            ref = [self._logprobs(self.reference, chunk) for chunk in chunks]
        kl = torch.zeros(len(rows))
        for part, (o, m), (r, _) in zip(parts, old, ref, strict=True):
            kl[part] = ((o - r) * m).sum(1)
        behaviour = None
        if self.overlap is not None:  # the engine's log-probs; the EOS standing in for an empty plan has none (ratio 1)
            behaviour = [
                place_completion_values(o.clone(), [r[0] for r in chunk], [samples[k][1].logprobs for k in part])
                for part, chunk, (o, _) in zip(parts, chunks, old, strict=True)
            ]
        return Batch(rows=rows, parts=parts, chunks=chunks, old=old, kl=kl, behaviour=behaviour)

    def _logprobs(self, model, rows: list[tuple[list[int], list[int]]]) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-token log-probabilities of each sampled plan after its prompt, and the mask of plan tokens."""
        return completion_logprobs(model, [r[0] for r in rows], [r[1] for r in rows], self.tokenizer.pad_token_id)

    def sync(self) -> None:
        """Put the trainer's weights into the generation engine (the HF engine is the policy itself)."""
        if not isinstance(self.engine, HFGenerator):
            self.policy.save_pretrained(self.sync_dir)
            self.engine.load_weights(self.sync_dir)
        self.engine_version = self.version

    def validate(self, iteration: int) -> float:
        """Intent accuracy of the engine's (= the policy's) greedy plans on the validation split, recorded."""
        accuracy = summarize(evaluate(self.engine, self.validation, self.limits))["intent_accuracy"]
        self.validation_history.append({"iteration": iteration, "intent_accuracy": accuracy})
        return accuracy

    def train(self, on_iteration: Callable[[dict], None] | None = None) -> dict:
        c = self.config
        best = (self.validate(0), 0, self._snapshot()) if c.validate_every else None
        for it in range(c.iterations):
            stats = self.step(it)
            done = it + 1
            if best is not None and (done % c.validate_every == 0 or done == c.iterations):
                accuracy = self.validate(done)
                if accuracy > best[0]:  # strictly: a tie keeps the earlier checkpoint (the SFT model at first)
                    best = (accuracy, done, self._snapshot())
            if on_iteration:
                on_iteration(stats)
        if best is not None and best[1] != c.iterations:
            self.policy.load_state_dict(best[2])
        return self.save(best[1] if best is not None else c.iterations)

    def _snapshot(self) -> dict[str, torch.Tensor]:
        return {k: v.detach().clone() for k, v in self.policy.state_dict().items()}

    def save(self, chosen: int | None = None) -> dict:
        """Write the policy (the chosen checkpoint: `chosen` iterations in, default the last) and the run's record."""
        out = Path(self.config.out)
        out.mkdir(parents=True, exist_ok=True)
        self.policy.save_pretrained(out)
        self.tokenizer.save_pretrained(out)
        chosen = len(self.history) if chosen is None else chosen
        totals = {k: sum(h["seconds"][k] for h in self.history) for k in ("generation", "reward", "training", "sync")}
        whole = sum(totals.values()) or 1.0
        summary = {
            "iterations": len(self.history),
            "share": {k: round(v / whole, 3) for k, v in totals.items()},
            "seconds": {k: round(v, 1) for k, v in totals.items()},
            "last": self.history[-1:],
            "advantage": self.config.advantage,
            "checkpoint_iteration": chosen,
        }
        if hasattr(self.engine, "describe"):  # Ray engines: their device, nodes and threads
            summary["engines"] = self.engine.describe()
        write_eval_set(self.validation, out / VALIDATION_FILE)
        if self.validation_history:
            by_iteration = {v["iteration"]: v["intent_accuracy"] for v in self.validation_history}
            summary["validation"] = {
                "n": len(self.validation),
                "pool": self.config.validation_pool,
                "sft": by_iteration[0],
                "chosen": by_iteration[chosen],
                "history": self.validation_history,
            }
        (out / "rlhf_rl.json").write_text(
            json.dumps(
                {"config": dataclasses.asdict(self.config), "summary": summary, "history": self.history}, indent=2
            )
        )
        return summary

    def close(self) -> None:
        if self.overlap is not None:
            self.overlap.close()
        if self.owns_engine and hasattr(self.engine, "close"):
            self.engine.close()
        shutil.rmtree(self.sync_dir, ignore_errors=True)
