"""Stage 2, preferences: candidate pairs from the model, executed in the twin, rated by people on the preference
page (pref_page), by the simulated operator, or imported from field-log ratings.

Entry point: `collect_pairs(PrefsConfig(...), simulated=True)`. K plans are sampled per instruction and every two
distinct ones form a pair (as InstructGPT ranks K responses): K(K-1)/2 comparisons for K generations. The
instructions are corpus lines (by default without the made-up training words: people rate real phrasings) or the
lines of an instructions file (field instructions: no intent, so only people rate them). `PairSampler` makes one
pair for an instruction a rater types on the page.
"""

from __future__ import annotations

import itertools
import math
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from edge.instruct.planner import InstructionPlanner, Planned
from edge.instruct.prompt import state_summary
from training.errors import ConfigError, TrainingError
from training.rlhf.config import ENGINES, PrefsConfig
from training.rlhf.corpus import CorpusGenerator, Example
from training.rlhf.execution import Execution, TwinExecutor
from training.rlhf.generation import HFGenerator
from training.rlhf.limits import limits_for
from training.rlhf.model import load_model
from training.rlhf.operator import SimulatedOperator, score_execution
from training.rlhf.prefs_store import PreferenceStore

PLOT_POINTS = 120  # trajectory points stored per plan for the page's plot


def collect_pairs(
    config: PrefsConfig, simulated: bool = True, on_pair: Callable[[int], None] | None = None
) -> dict[str, int]:
    """Add up to `config.pairs` pairs of distinct sampled plans to the store; with `simulated`, the simulated
    operator rates each one that has an intent (ties stay unrated). Returns the store's counts."""
    store = PreferenceStore(config.db)
    limits = limits_for(config.robot)
    planner = InstructionPlanner(_generator(config), limits)
    executor = TwinExecutor(config.robot, policy=config.policy)
    operator = SimulatedOperator(
        executor, noise=config.operator_noise, skip_below=config.operator_skip_below, seed=config.seed
    )
    corpus = CorpusGenerator(config.pool, limits, seed=config.seed, made_up_words=config.made_up_words)
    field = _instruction_lines(config.instructions) if config.instructions else None
    made, drawn, rounds = 0, 0, 0
    while made < config.pairs and rounds < (1 if field else 10):
        rounds += 1
        # identical samples make fewer than K(K-1)/2 pairs per instruction: draw as many as the yield so far needs,
        # at most one instruction per pair still wanted (a model that repeats itself must not make a round huge)
        per_instruction = made / drawn if drawn else config.candidates * (config.candidates - 1) / 2
        examples = field or corpus.examples(math.ceil((config.pairs - made) / max(per_instruction, 1.0)))
        drawn += len(examples)
        groups = sampled_plans(planner, examples, config.candidates, config.temperature, config.seed + rounds)
        runs = iter(executor.execute([p.plan for group in groups for p in group]))
        for example, group in zip(examples, groups, strict=True):
            executed = [(p, next(runs)) for p in group]
            for (a, run_a), (b, run_b) in itertools.combinations(executed, 2):
                if made >= config.pairs:
                    break
                pair_id = store.add_pair(
                    example.instruction,
                    example.state,
                    (a.output, b.output),
                    (_for_page(run_a), _for_page(run_b)),
                    example.expect or None,
                    origin="field" if field else "model",
                    steps=example.steps,
                )
                if simulated and example.expect:
                    choice = operator.choose(
                        score_execution(run_a, example.expect, example.steps),
                        score_execution(run_b, example.expect, example.steps),
                    )
                    if choice:
                        store.add_preference(pair_id, choice, "simulated-operator", "simulated")
                made += 1
                if on_pair:
                    on_pair(made)
    return store.counts()


def _generator(config: PrefsConfig):
    """The candidates' sampler: this process's shared vLLM engine (RL then reuses it: one start per pipeline) or
    transformers' generate on the model itself (batched, but a 30-layer base samples minutes per hundred plans)."""
    if config.engine not in ENGINES:
        raise ConfigError(f"engine must be one of {', '.join(ENGINES)}, got {config.engine!r}")
    if config.engine == "vllm":
        from training.rlhf.engine import shared_engine

        return shared_engine(config.model, seed=config.seed)
    return HFGenerator(*load_model(config.model))


def sampled_plans(
    planner: InstructionPlanner, examples: Sequence[Example], n: int, temperature: float, seed: int
) -> list[list[Planned]]:
    """n sampled plans per example, keeping one of each distinct model output (a fast-path stop has none)."""
    samples = planner.plan_many(
        [e.instruction for e in examples], [e.state for e in examples], n=n, temperature=temperature, seed=seed
    )
    return [list({p.output: p for p in group if p.output}.values()) for group in samples]


class PairSampler:
    """One pair for an instruction a rater types on the preference page: `candidates` plans sampled from the model,
    the first two distinct ones executed in the twin and stored (no intent: only people rate it)."""

    def __init__(
        self,
        model: str,
        robot: str = "rover",
        candidates: int = 4,
        temperature: float = 1.0,
        policy: str | None = None,
    ):
        self.planner = InstructionPlanner(HFGenerator(*load_model(model)), limits_for(robot))
        self.executor, self.candidates = TwinExecutor(robot, policy=policy), candidates
        self.temperature = temperature
        self._lock = threading.Lock()  # the page serves requests from a thread pool; one generate at a time
        self._calls = 0

    def __call__(self, store: PreferenceStore, instruction: str, state: str | None = None) -> int | None:
        """The new pair's id, or None when the model wrote fewer than two distinct plans (e.g. a stop)."""
        example = Example(instruction, (), {}, state or state_summary())
        with self._lock:
            self._calls += 1
            group = sampled_plans(self.planner, [example], self.candidates, self.temperature, self._calls)[0][:2]
            if len(group) < 2:
                return None
            run_a, run_b = self.executor.execute([p.plan for p in group])
        return store.add_pair(
            instruction,
            example.state,
            (group[0].output, group[1].output),
            (_for_page(run_a), _for_page(run_b)),
            origin="typed",
        )


def _instruction_lines(path: str) -> list[Example]:
    """Instructions from a text file, one a line ('#' starts a comment), as examples without an intent."""
    p = Path(path)
    if not p.is_file():
        raise TrainingError(f"instructions file {p} does not exist")
    lines = [line.split("#", 1)[0].strip() for line in p.read_text().splitlines()]
    examples = [Example(line, (), {}, state_summary()) for line in lines if line]
    if not examples:
        raise TrainingError(f"instructions file {p} holds no instruction")
    return examples


def _for_page(execution: Execution) -> dict:
    path = execution.path
    idx = np.unique(np.linspace(0, len(path) - 1, min(PLOT_POINTS, len(path))).round().astype(int))
    return {"metrics": {k: round(v, 3) for k, v in execution.metrics.items()}, "path": np.round(path[idx], 3).tolist()}
