"""`sim2real loop`: train -> export -> validate -> instruction model -> deploy (SIL) -> analyse -> retrain -> check.

    from sim2real.loop import LoopConfig, run_loop

Files: config (LoopConfig, budgets), stages (one function per stage, the stage list), runner (the stages as a
sim2real.pipeline Pipeline: loop.json, resume, interruption), cluster (the heavy stages as Ray tasks with
--ray-address), report (the HTML report).
"""

from sim2real.loop.config import LoopConfig

__all__ = ["LoopConfig"]
