"""Where batches run: in this process (one worker: no Ray start-up cost), or as Ray tasks on a local Ray
instance of W workers or on a running cluster (`ray_address`), at most W batches in flight, results handed
back in completion order so they stream to the results file.

On Ray, a batch whose worker or node dies runs again on another node (Ray's task retries): the results hold
each scenario once, and each row names the Ray node that simulated it."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from sim.campaign.config import CampaignConfig
from sim.campaign.matrix import BatchJob
from sim.campaign.rollout import ArtifactFiles, BatchResult, run_batch
from sim.robot import RobotSpec

NODE_LOSS_RETRIES = 3  # how many dead workers or nodes one batch outlives


def _run_batch_on_node(
    job: BatchJob, cfg: CampaignConfig, spec: RobotSpec, files: ArtifactFiles, threads: int
) -> BatchResult:
    """run_batch as a Ray task, each row tagged with the node it ran on (where a cluster's campaign ran)."""
    import ray

    result = run_batch(job, cfg, spec, files, threads)
    node = ray.get_runtime_context().get_node_id()
    for row in result.rows:
        row["node"] = node
    return result


class Executor:
    def __init__(self, workers: int = 1, ray_address: str | None = None, threads: int = 1):
        """`threads`: MuJoCo threads per worker (one Ray task reserves that many CPUs)."""
        if workers < 1 or threads < 1:
            raise ValueError("--workers and threads per worker must be >= 1")
        self.workers, self.address, self.threads = workers, ray_address, threads
        self.uses_ray = workers > 1 or ray_address is not None
        self._started_ray = False

    def __enter__(self) -> Executor:
        if self.uses_ray:
            import ray

            if not ray.is_initialized():
                ray.init(
                    address=self.address,
                    num_cpus=None if self.address else self.workers * self.threads,
                    include_dashboard=False,
                    logging_level=logging.ERROR,
                    log_to_driver=False,
                )
                self._started_ray = True
        return self

    def __exit__(self, *exc) -> None:
        if self._started_ray:
            import ray

            ray.shutdown()

    def run(
        self,
        jobs: Sequence[BatchJob],
        cfg: CampaignConfig,
        spec: RobotSpec,
        files: ArtifactFiles,
        on_result: Callable[[BatchResult], None],
    ) -> None:
        if not self.uses_ray:
            for job in jobs:
                on_result(run_batch(job, cfg, spec, files, self.threads))
            return
        import ray
        from ray.exceptions import RayTaskError

        # retries are for lost workers and nodes only (retry_exceptions stays off): a batch that raised would
        # raise again
        task = ray.remote(num_cpus=self.threads, max_retries=NODE_LOSS_RETRIES)(_run_batch_on_node)
        cfg_ref, spec_ref, files_ref = ray.put(cfg), ray.put(spec), ray.put(files)  # sent once, not once per batch
        queue, pending = list(jobs), {}
        while queue or pending:
            while queue and len(pending) < self.workers:
                pending[task.remote(queue.pop(0), cfg_ref, spec_ref, files_ref, self.threads)] = True
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                del pending[ref]
                try:
                    result = ray.get(ref)
                except RayTaskError as e:
                    raise e.cause from None  # the worker's own error (e.g. ArtifactError), as one clear line
                on_result(result)
