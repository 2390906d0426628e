"""Export an instruction model (a Hugging Face causal-LM directory, as model.load_model reads it) to the directory the
robot runs on ONNX Runtime (edge.instruct.onnx_manifest): model.onnx, one decoding step with the KV cache in and
out; tokenizer.json, the tokenizer transformers itself ran (loadable with `tokenizers` alone); manifest.json.

    export_instruction_model("runs/rlhf/rl", "runs/rlhf/onnx")

The export is checked before anything is written: the ONNX step must give the torch model's logits (a left-padded
prompt, then one cached step) and the saved tokenizer the same token ids. Files are written atomically, the
manifest last: a reader in between sees a hash mismatch and refuses, never a wrong pairing.

`weights="int8"` quantises the checked float model with ONNX Runtime's dynamic quantisation (int8 weights of the
MatMul and Gather ops, activations quantised at run time): a quarter of the bytes to stream per generated token,
which is what a plan's latency on a CPU is made of for a 135M-parameter model. Its logits are no longer the torch
model's to 1e-3: benchmarks.instruct_onnx measures what it costs in plans and accuracy.
"""

from __future__ import annotations

import logging
import tempfile
import warnings
from pathlib import Path

import numpy as np
import onnxruntime as ort

from edge.errors import ArtifactError
from edge.fileio import atomic_write_bytes, sha256_bytes, sha256_file
from edge.instruct.onnx_manifest import (
    FORMAT,
    INPUTS,
    LOGITS,
    MODEL_FILE,
    SCHEMA_VERSION,
    TOKENIZER_FILE,
    cache_names,
    write_manifest,
)
from edge.instruct.plan import plan_format_of
from edge.instruct.prompt import build_prompt, chat_prompt, in_chat
from edge.instruct.slots import uses_number_slots

OPSET = 18
PARITY_ATOL = 1e-3  # largest logit difference from the torch model the export accepts (float32: ~1e-5 seen)
_PROBES = (build_prompt("go forward #1 m then turn left"), build_prompt("stop", "moving forward, turning left"))


WEIGHTS = ("float32", "int8")


def export_instruction_model(model_dir: str | Path, out_dir: str | Path, weights: str = "float32") -> dict:
    """Write `out_dir`/{model.onnx, tokenizer.json, manifest.json}; return the manifest. `weights`: WEIGHTS."""
    if weights not in WEIGHTS:
        raise ArtifactError(f"weights must be one of {', '.join(WEIGHTS)}, got {weights!r}")
    from tokenizers import Tokenizer

    from training.rlhf.model import load_model

    model, tokenizer = load_model(model_dir, device="cpu")  # the parity check runs ONNX Runtime on the CPU
    cfg = model.config
    probes = [in_chat(p, chat_prompt(cfg)) for p in _PROBES]  # as the model reads its prompts
    layers = cfg.num_hidden_layers
    cache = {
        "layers": layers,
        "kv_heads": cfg.num_key_value_heads,
        "head_dim": getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads,
    }
    backend = Tokenizer.from_str(tokenizer.backend_tokenizer.to_str())  # a copy: the one transformers ran
    backend.no_padding()  # the runtime pads itself (left, as transformers does here)
    backend.no_truncation()
    tokenizer_bytes = backend.to_str().encode()
    onnx_bytes = _export(model, cache)

    probe = tokenizer(probes, return_tensors="np", padding=True)
    if [e.ids for e in Tokenizer.from_str(tokenizer_bytes.decode()).encode_batch(probes)] != [
        ids[m == 1].tolist() for ids, m in zip(probe["input_ids"], probe["attention_mask"], strict=True)
    ]:
        raise ArtifactError(f"{model_dir}: the saved tokenizer encodes differently from transformers'; not written")
    _check_parity(model, onnx_bytes, probe["input_ids"], probe["attention_mask"], cache)
    if weights == "int8":
        onnx_bytes = _quantized(onnx_bytes)

    weight_files = sorted(Path(model_dir).glob("*.safetensors")) or sorted(Path(model_dir).glob("*.bin"))
    manifest = {
        "format": FORMAT,
        "schema_version": SCHEMA_VERSION,
        "source_model": {
            "path": str(Path(model_dir).resolve()),
            "architecture": (cfg.architectures or [type(model).__name__])[0],
            "weights_sha256": {w.name: sha256_file(w) for w in weight_files},
        },
        "model": {"file": MODEL_FILE, "sha256": sha256_bytes(onnx_bytes), "opset": OPSET, "dtype": weights},
        "tokenizer": {"file": TOKENIZER_FILE, "sha256": sha256_bytes(tokenizer_bytes)},
        "cache": cache,
        "vocab_size": cfg.vocab_size,
        "eos_id": tokenizer.eos_token_id,
        "pad_id": tokenizer.pad_token_id,
        "special_ids": sorted(set(tokenizer.all_special_ids)),
        "number_slots": uses_number_slots(cfg),
        "chat_prompt": chat_prompt(cfg),  # None: the plain prompt
        "plan_format": plan_format_of(cfg),
        "max_positions": cfg.max_position_embeddings,
    }
    out = Path(out_dir)
    atomic_write_bytes(out / MODEL_FILE, onnx_bytes)
    atomic_write_bytes(out / TOKENIZER_FILE, tokenizer_bytes)
    write_manifest(out, manifest)
    return manifest


def _step_module(model, layers: int):
    """The model as one decoding step on flat tensors (ONNX has no cache objects)."""
    import torch
    from transformers import DynamicCache

    class Step(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, position_ids, past):
            cache = DynamicCache([(past[2 * i], past[2 * i + 1]) for i in range(layers)], config=self.model.config)
            out = self.model(
                input_ids=input_ids,
                attention_mask=attention_mask,
                position_ids=position_ids,
                past_key_values=cache,
                use_cache=True,
            )
            return (out.logits, *[t for layer in out.past_key_values.layers for t in (layer.keys, layer.values)])

    return Step().eval()


def _export(model, cache: dict) -> bytes:
    import onnx
    import torch

    layers, shape = cache["layers"], (cache["kv_heads"], cache["head_dim"])
    # example sizes above 1 everywhere: torch.export specialises a size-1 (or 0) example dimension to a constant
    batch, seq, past_len = 2, 4, 3
    gen = torch.Generator().manual_seed(0)
    args = (
        torch.randint(3, model.config.vocab_size, (batch, seq), generator=gen),
        torch.ones(batch, past_len + seq, dtype=torch.long),
        torch.arange(past_len, past_len + seq).expand(batch, seq),
        tuple(torch.randn(batch, shape[0], past_len, shape[1], generator=gen) for _ in range(2 * layers)),
    )
    b, s, p, t = (torch.export.Dim(n) for n in ("batch", "seq", "past", "total"))
    dynamic = ({0: b, 1: s}, {0: b, 1: t}, {0: b, 1: s}, tuple({0: b, 2: p} for _ in range(2 * layers)))
    with warnings.catch_warnings(), tempfile.TemporaryDirectory() as tmp:
        for category in (FutureWarning, UserWarning):  # torch.export's deprecations, the exporter's axis-name notes
            warnings.simplefilter("ignore", category)
        logging.getLogger("torch.onnx._internal.exporter._registration").setLevel(logging.ERROR)  # "torchvision..."
        program = torch.onnx.export(
            _step_module(model, layers),
            args,
            input_names=[*INPUTS, *cache_names(layers, "past")],
            output_names=[LOGITS, *cache_names(layers, "present")],
            dynamic_shapes=dynamic,
            opset_version=OPSET,
            dynamo=True,
            verbose=False,
        )
        path = Path(tmp) / MODEL_FILE
        program.save(str(path), external_data=False)
        data = path.read_bytes()
    onnx.checker.check_model(onnx.load_from_string(data), full_check=True)
    return data


def _quantized(onnx_bytes: bytes) -> bytes:
    """The model with int8 weights (onnxruntime.quantization.quantize_dynamic, which reads and writes files)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    root, quiet = logging.getLogger(), logging.NullHandler()
    level = root.level
    # it advises pre-processing through the root logger on every call (logging.warning, which would also give the
    # root logger a console handler for good): the caller's console is not its to use
    root.setLevel(logging.ERROR)
    root.addHandler(quiet)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            source, target = Path(tmp) / "float.onnx", Path(tmp) / "int8.onnx"
            source.write_bytes(onnx_bytes)
            quantize_dynamic(source, target, weight_type=QuantType.QInt8)
            return target.read_bytes()
    finally:
        root.removeHandler(quiet)
        root.setLevel(level)


def _check_parity(model, onnx_bytes: bytes, ids: np.ndarray, mask: np.ndarray, cache: dict) -> None:
    """Prefill of the left-padded probes (empty cache), then one cached step, against the torch model."""
    import torch

    session = ort.InferenceSession(onnx_bytes, providers=["CPUExecutionProvider"])
    layers, batch = cache["layers"], ids.shape[0]
    pos = np.maximum(mask.cumsum(-1) - 1, 0)
    nxt = np.full((batch, 1), 5, np.int64)
    empty = np.zeros((batch, cache["kv_heads"], 0, cache["head_dim"]), np.float32)
    first = session.run(
        None, dict(zip(INPUTS, (ids, mask, pos), strict=True)) | dict.fromkeys(cache_names(layers, "past"), empty)
    )
    mask2 = np.concatenate([mask, np.ones((batch, 1), np.int64)], 1)
    feed = dict(zip(INPUTS, (nxt, mask2, pos[:, -1:] + 1), strict=True))
    second = session.run([LOGITS], feed | dict(zip(cache_names(layers, "past"), first[1:], strict=True)))[0]
    with torch.inference_mode():
        full = model(
            input_ids=torch.from_numpy(np.concatenate([ids, nxt], 1)),
            attention_mask=torch.from_numpy(mask2),
            position_ids=torch.from_numpy(np.concatenate([pos, pos[:, -1:] + 1], 1)),
        ).logits.numpy()
    real = mask == 1  # padded positions' logits are never read
    err = max(float(np.abs(first[0] - full[:, :-1])[real].max()), float(np.abs(second - full[:, -1:]).max()))
    if not err <= PARITY_ATOL:
        raise ArtifactError(f"exported ONNX differs from the torch model by {err:.3g} (> {PARITY_ATOL}); not written")
