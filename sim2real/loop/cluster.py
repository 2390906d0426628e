"""The loop's heavy stages as Ray tasks (`sim2real loop --ray-address`).

    with connected(cfg.ray_address):
        stages = on_cluster(STAGES, budget.resources, state_file)

A stage the budget gives resources (StageResources) runs as one Ray task that reserves them, executing the same
stage function it runs in the loop's own process, so its result has the same form; the other stages stay in the
driver. The driver keeps the state file and the report. The stage writes under the run directory on whichever node
Ray places it, so that directory must be one path every node sees (a shared filesystem); the task checks that it
sees the state file before it starts, and the driver that it sees every path under the run directory the result
names. The stage's progress reaches the driver through a Ray queue. A task whose worker or node dies is run again
(NODE_LOSS_RETRIES) and resumes its own work as a re-run after an interruption does; a stage that raised is not.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from sim2real.errors import UserError
from sim2real.loop.outputs import RayTask, StageResult
from sim2real.pipeline import Stage, StageContext

if TYPE_CHECKING:
    from ray.util.queue import Queue

    from sim2real.loop.config import StageResources

NODE_LOSS_RETRIES = 3  # how many dead workers or nodes one stage outlives (Ray's default for tasks, made explicit)
PROGRESS_EVERY_S = 0.5  # a node sends its stage's progress at most this often (each send is a call to the queue)
SHARED_PATH = "--out must be a path every node of the cluster sees (a shared filesystem, e.g. NFS)"


@contextmanager
def connected(address: str) -> Iterator[None]:
    """Joined to the Ray cluster at `address` within the block ('': nothing to join). The workers' output stays in
    the nodes' Ray logs: the stages report through their progress and results."""
    if not address:
        yield
        return
    import ray

    try:
        ray.init(address=address, logging_level=logging.ERROR, log_to_driver=False)
    except (ConnectionError, RuntimeError, ValueError) as e:
        raise UserError(f"--ray-address {address}: no Ray cluster to join ({str(e).splitlines()[0]})") from None
    try:
        yield
    finally:
        ray.shutdown()  # ends this job: Ray stops its tasks still running (an interrupted stage)


def on_cluster(
    stages: tuple[Stage, ...], resources: Mapping[str, StageResources], state_file: Path
) -> tuple[Stage, ...]:
    """The stages, each one named in `resources` running as a Ray task that reserves them."""
    return tuple(
        dataclasses.replace(s, run=RayStage(s.name, s.run, resources[s.name], state_file)) if s.name in resources else s
        for s in stages
    )


@dataclasses.dataclass(frozen=True)
class RayStage:
    """A stage function run as a Ray task; called in the driver like the function itself."""

    name: str
    run: Callable[[StageContext], StageResult]
    request: StageResources
    state_file: Path  # the driver's: a node that does not see it does not see the run directory

    def __call__(self, ctx: StageContext) -> StageResult:
        import ray
        from ray.exceptions import RayTaskError
        from ray.util.queue import Queue
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        # on the driver's node: a queue on the stage's node would die with it and fail the stage's retry; no CPU
        here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)
        progress = Queue(actor_options={"num_cpus": 0, "scheduling_strategy": here})
        task = ray.remote(_run_on_node).options(
            **self.request.ray_options(), max_retries=NODE_LOSS_RETRIES, name=f"loop.{self.name}"
        )
        ref = task.remote(self.run, dataclasses.replace(ctx, progress=None), self.request, self.state_file, progress)
        try:
            while not ray.wait([ref], timeout=PROGRESS_EVERY_S)[0]:
                _show(progress, ctx)
            _show(progress, ctx)
            result = ray.get(ref)
        except RayTaskError as e:
            raise e.cause from None  # the stage's own error (a UserError: one line), not the remote traceback
        finally:
            progress.shutdown()
        unseen = [p for p in _paths_under(result, ctx.out) if not Path(p).exists()]
        if unseen:
            raise UserError(
                f"the {self.name} stage ran on Ray node {result.ray_task.node} and wrote {unseen[0]}, which this "
                f"machine cannot read: {SHARED_PATH}"
            )
        return result


def _run_on_node(
    run: Callable, ctx: StageContext, request: StageResources, state_file: Path, progress: Queue
) -> StageResult:
    """The Ray task: the stage function on this node, its progress sent to the driver, its placement recorded."""
    import ray

    here = ray.get_runtime_context()
    if not state_file.is_file():
        raise UserError(f"Ray node {here.get_node_id()} does not see the run directory {ctx.out}: {SHARED_PATH}")
    sent = [0.0]

    def send(fraction: float, note: str) -> None:
        if fraction >= 1.0 or time.monotonic() - sent[0] >= PROGRESS_EVERY_S:
            progress.put_nowait((fraction, note))
            sent[0] = time.monotonic()

    result = run(dataclasses.replace(ctx, progress=send))
    placement = RayTask(here.get_node_id(), here.get_task_id(), dataclasses.asdict(request))
    return dataclasses.replace(result, ray_task=placement)


def _show(progress: Queue, ctx: StageContext) -> None:
    """The progress the node sent since the last call, shown in the driver."""
    for fraction, note in progress.get_nowait_batch(progress.qsize()):
        ctx.progress(fraction, note)


def _paths_under(result: StageResult, out: Path) -> list[str]:
    """The paths under the run directory that the stage's output names (its top-level string fields)."""
    data = result.output.to_json() if result.output else {}
    return [v for v in data.values() if isinstance(v, str) and Path(v).is_relative_to(out)]
