"""The robot's instruction model: an exported directory (onnx_manifest.py) decoded on ONNX Runtime with numpy and
the `tokenizers` library only (no torch, no transformers), behind the planner's Generator interface.

    generator = OnnxGenerator("/opt/instruct", providers=providers_for("auto"))
    planner = InstructionPlanner(generator, limits_from_manifest("/opt/policy"))

Decoding does what transformers' generate does for the training side's HFGenerator: prompts left-padded, positions
counted over the real tokens, the KV cache carried from step to step, greedy (temperature 0) or sampling from the
full softmax, grammar-constrained through the same numpy tables (grammar.py), ending at end-of-sequence. Rows that
end leave the batch, so a long plan does not make the short ones pay.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import cast

import numpy as np
import onnxruntime as ort

from edge.errors import ArtifactError
from edge.instruct.generator import MAX_NEW_TOKENS, Completion
from edge.instruct.grammar import GrammarMask, PlanGrammars, TokenGrammar
from edge.instruct.onnx_manifest import INPUTS, LOGITS, cache_names, read_exported
from edge.instruct.plan import plan_format_of
from edge.instruct.prompt import chat_prompt
from edge.providers import BACKENDS, providers_for

__all__ = ["BACKENDS", "OnnxGenerator", "providers_for"]


class OnnxGenerator:
    """Batched generation on an exported instruction model; implements edge.instruct.generator.Generator."""

    def __init__(
        self,
        model_dir: str | Path,
        providers: Sequence[str] | None = None,
        threads: int = 1,
        batch_size: int = 256,
    ):
        """providers: ONNX Runtime execution providers (default providers_for("auto")); threads: intra-op threads
        (0: ONNX Runtime's choice, one per core; the project's small model plans faster on one)."""
        from tokenizers import Tokenizer

        manifest, model_bytes, tokenizer_text = read_exported(model_dir)
        source = Path(model_dir)
        try:
            self.tokenizer = Tokenizer.from_str(tokenizer_text)
        except Exception as e:  # tokenizers raises its own Exception subclass for a malformed file
            raise ArtifactError(f"{source / manifest['tokenizer']['file']}: not a tokenizer ({e})") from None
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.log_severity_level = 3
        # no busy-waiting pool threads between steps: on the robot the control loop shares these cores
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        try:
            self.session = ort.InferenceSession(model_bytes, opts, providers=list(providers or providers_for("auto")))
        except Exception as e:  # onnxruntime's own exception types (InvalidProtobuf, Fail, ...) derive from Exception
            raise ArtifactError(
                f"{source / manifest['model']['file']}: ONNX Runtime cannot load it: {str(e).strip().splitlines()[0]}"
            ) from None
        self.providers = self.session.get_providers()
        cache = manifest["cache"]
        self._past, self._present = cache_names(cache["layers"], "past"), cache_names(cache["layers"], "present")
        self._kv_shape = (int(cache["kv_heads"]), int(cache["head_dim"]))
        inputs, outputs = [i.name for i in self.session.get_inputs()], [o.name for o in self.session.get_outputs()]
        if inputs != [*INPUTS, *self._past] or outputs != [LOGITS, *self._present]:
            raise ArtifactError(f"{source}: model inputs {inputs} / outputs {outputs} are not the manifest's")
        self.eos, self.pad = int(manifest["eos_id"]), int(manifest["pad_id"])
        self.max_positions, self.batch_size = int(manifest["max_positions"]), batch_size
        self.number_slots = bool(manifest["number_slots"])
        self.chat_prompt = chat_prompt(manifest)  # absent in exports of models that read the plain prompt
        self.plan_format = plan_format_of(manifest)  # absent in exports of models that write objects
        self.manifest = manifest
        special = set(manifest["special_ids"])
        texts = [
            None if i in special else self.tokenizer.decode([i], skip_special_tokens=False)
            for i in range(self.tokenizer.get_vocab_size())
        ]
        texts += [None] * (int(manifest["vocab_size"]) - len(texts))  # logits rows no token has (padded embeddings)
        self._grammars = PlanGrammars(texts, self.eos, self.number_slots, self.plan_format)

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
        rng = np.random.default_rng(seed)
        out: list[list[Completion]] = []
        for start in range(0, len(prompts), self.batch_size):
            chunk = prompts[start : start + self.batch_size]
            ids = [e.ids for e in self.tokenizer.encode_batch(chunk) for _ in range(n)]  # each prompt's row n times
            grammars = [self._grammars.for_prompt(p) for p in chunk for _ in range(n)] if constrained else None
            rows = self._decode(ids, grammars, temperature, max_new_tokens, ignore_eos, rng)
            out += [[self._completion(r) for r in rows[i * n : (i + 1) * n]] for i in range(len(chunk))]
        return out

    def _decode(
        self,
        prompts: list[list[int]],
        grammars: list[TokenGrammar] | None,
        temperature: float,
        max_new_tokens: int,
        ignore_eos: bool,
        rng: np.random.Generator,
    ) -> list[list[int]]:
        """New token ids per row (ending with EOS where the row ended)."""
        rows, width = len(prompts), max(len(p) for p in prompts)
        ids = np.full((rows, width), self.pad, np.int64)
        mask = np.zeros((rows, width), np.int64)
        for i, p in enumerate(prompts):  # left padding, as transformers generates
            ids[i, width - len(p) :], mask[i, width - len(p) :] = p, 1
        positions = np.maximum(mask.cumsum(-1) - 1, 0)
        heads, dim = self._kv_shape
        past = [np.zeros((rows, heads, 0, dim), np.float32)] * len(self._past)  # nothing cached yet
        budget = min(max_new_tokens, self.max_positions - width)  # the model has no positions beyond its maximum
        grammar = GrammarMask(grammars, budget) if grammars else None
        new: list[list[int]] = [[] for _ in range(rows)]
        active = np.arange(rows)  # rows still generating; the batch shrinks as rows end
        last = np.full(rows, self.pad, np.int64)  # per row, the token taken at the previous step (pad: ended)
        for step in range(max(budget, 0)):
            feed = dict(zip(INPUTS, (ids, mask, positions), strict=True)) | dict(zip(self._past, past, strict=True))
            # the exported graph's outputs are dense tensors (onnxruntime's annotation also allows sparse, list, dict)
            logits, *past = cast("list[np.ndarray]", self.session.run(None, feed))
            scores = logits[:, -1, :].astype(np.float32)
            if ignore_eos:
                scores[:, self.eos] = -np.inf
            if grammar is not None:
                scores[~grammar.step(last if step else None)[active]] = -np.inf
            chosen = self._choose(scores, temperature, rng)
            last[:] = self.pad
            last[active] = chosen
            for row, token in zip(active, chosen.tolist(), strict=True):
                new[row].append(token)
            going = chosen != self.eos if not ignore_eos else np.ones(len(active), bool)
            if not going.all():
                active, chosen, mask, positions = active[going], chosen[going], mask[going], positions[going]
                past = [p[going] for p in past]
            if not len(active):
                break
            ids, mask = chosen[:, None], np.concatenate([mask, np.ones((len(active), 1), np.int64)], 1)
            positions = positions[:, -1:] + 1
        return new

    @staticmethod
    def _choose(scores: np.ndarray, temperature: float, rng: np.random.Generator) -> np.ndarray:
        if temperature <= 0:
            return scores.argmax(-1)
        z = scores / temperature
        p = np.exp(z - z.max(-1, keepdims=True))
        cdf = np.cumsum(p, -1)
        u = rng.random((len(scores), 1)) * cdf[:, -1:]
        return np.minimum((cdf < u).sum(-1), scores.shape[-1] - 1)

    def _completion(self, ids: list[int]) -> Completion:
        if self.eos in ids:
            ids = ids[: ids.index(self.eos) + 1]
        else:  # as HFGenerator: a pad the model wrote cannot be told from padding there
            ids = [t for t in ids if t != self.pad]
        return Completion(self.tokenizer.decode(ids, skip_special_tokens=True), ids)
