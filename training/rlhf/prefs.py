"""Stage 2, preferences: candidate pairs from the model, executed in the twin, rated by people on the preference
page (pref_page), by the simulated operator, or imported from field-log ratings.

Entry point: `collect_pairs(PrefsConfig(...), simulated=True)`. K plans are sampled per instruction and every two
distinct ones form a pair (as InstructGPT ranks K responses): K(K-1)/2 comparisons for K generations.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import numpy as np

from edge.instruct.planner import InstructionPlanner
from training.rlhf.config import PrefsConfig
from training.rlhf.corpus import CorpusGenerator
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
    operator rates each one (ties stay unrated). Returns the store's counts."""
    store = PreferenceStore(config.db)
    limits = limits_for(config.robot)
    model, tokenizer = load_model(config.model)
    planner = InstructionPlanner(HFGenerator(model, tokenizer), limits)
    executor = TwinExecutor(config.robot)
    operator = SimulatedOperator(
        executor, noise=config.operator_noise, skip_below=config.operator_skip_below, seed=config.seed
    )
    corpus = CorpusGenerator(config.pool, limits, seed=config.seed)
    made, rounds = 0, 0
    per_instruction = config.candidates * (config.candidates - 1) // 2
    while made < config.pairs and rounds < 10:  # identical samples make fewer pairs: draw more instructions
        rounds += 1
        examples = corpus.examples(-(-(config.pairs - made) // per_instruction))
        samples = planner.plan_many(
            [e.instruction for e in examples],
            [e.state for e in examples],
            n=config.candidates,
            temperature=config.temperature,
            seed=config.seed + rounds,
        )
        distinct = [list({p.output: p for p in group if p.output}.values()) for group in samples]
        runs = iter(executor.execute([p.plan for group in distinct for p in group]))
        for example, group in zip(examples, distinct, strict=True):
            executed = [(p, next(runs)) for p in group]
            for (a, run_a), (b, run_b) in itertools.combinations(executed, 2):
                if made >= config.pairs:
                    break
                pair_id = store.add_pair(
                    example.instruction,
                    example.state,
                    a.output,
                    b.output,
                    _for_page(run_a),
                    _for_page(run_b),
                    example.expect,
                )
                if simulated:
                    choice = operator.choose(
                        score_execution(run_a, example.expect), score_execution(run_b, example.expect)
                    )
                    if choice:
                        store.add_preference(pair_id, choice, "simulated-operator", "simulated")
                made += 1
                if on_pair:
                    on_pair(made)
    return store.counts()


def _for_page(execution: Execution) -> dict:
    path = execution.path
    idx = np.unique(np.linspace(0, len(path) - 1, min(PLOT_POINTS, len(path))).round().astype(int))
    return {"metrics": {k: round(v, 3) for k, v in execution.metrics.items()}, "path": np.round(path[idx], 3).tolist()}
