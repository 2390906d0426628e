"""The exported instruction model directory the robot runs (training.rlhf.export_onnx writes it, onnx_generator reads
it): `model.onnx` (one decoding step of the causal LM with its KV cache), `tokenizer.json` (the `tokenizers`
library's format) and `manifest.json`, which vouches for both by sha256 and says how to drive the model.

Model inputs: input_ids, attention_mask (over past and new tokens), position_ids (int64), past.{i}.key and
past.{i}.value per layer ([batch, kv_heads, past, head_dim] float32; past 0 on the first step); outputs: logits
[batch, seq, vocab] and present.{i}.key / present.{i}.value, the cache for the next step.

Schema 2 adds `chat_prompt`: the model's rendered chat template (edge.instruct.prompt.in_chat), null for a model
that reads the plain prompt. A schema-1 runtime refuses it rather than prompting a chat model wrongly. Schema 3
adds `plan_format` (edge.instruct.plan.PLAN_FORMATS): the form of JSON the model writes, which the grammar must
follow; a schema-2 runtime refuses it rather than constraining an arrays model to objects. This runtime reads all
three (schemas 1 and 2 write objects).
"""

from __future__ import annotations

import json
from pathlib import Path

from edge.errors import ArtifactError
from edge.fileio import atomic_write_bytes, sha256_bytes

FORMAT = "edge-instruct-onnx"
SCHEMA_VERSION = 3
READABLE_SCHEMAS = (1, 2, 3)
MANIFEST_FILE = "manifest.json"
MODEL_FILE = "model.onnx"
TOKENIZER_FILE = "tokenizer.json"
INPUTS = ("input_ids", "attention_mask", "position_ids")
LOGITS = "logits"


def cache_names(layers: int, prefix: str) -> list[str]:
    """prefix "past" (inputs) or "present" (outputs): key and value of every layer, in that order."""
    return [f"{prefix}.{i}.{kv}" for i in range(layers) for kv in ("key", "value")]


def write_manifest(out_dir: str | Path, manifest: dict) -> None:
    atomic_write_bytes(Path(out_dir) / MANIFEST_FILE, (json.dumps(manifest, indent=2) + "\n").encode())


_REQUIRED = (
    "format",
    "schema_version",
    "source_model",
    "model",
    "tokenizer",
    "cache",
    "vocab_size",
    "eos_id",
    "pad_id",
    "special_ids",
    "number_slots",
    "max_positions",
)


def read_exported(model_dir: str | Path) -> tuple[dict, bytes, str]:
    """(manifest, model.onnx bytes, tokenizer.json text) of an exported directory, the bytes being the ones whose
    sha256 the manifest records; ArtifactError (one line, naming the file) otherwise."""
    path = Path(model_dir)
    manifest_path = path / MANIFEST_FILE
    if not manifest_path.is_file():
        hint = (
            " (a Hugging Face model directory: export it first, training.rlhf.export_onnx)"
            if (path / "config.json").is_file()
            else ""
        )
        raise ArtifactError(f"{path} is not an exported instruction model: no {MANIFEST_FILE}{hint}")
    try:
        manifest = json.loads(manifest_path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ArtifactError(f"{manifest_path}: not JSON ({e.__class__.__name__})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise ArtifactError(f"{manifest_path}: not an instruction model manifest (format {FORMAT!r})")
    missing = [k for k in _REQUIRED if k not in manifest]
    if missing:
        raise ArtifactError(f"{manifest_path}: missing {', '.join(missing)}")
    if manifest["schema_version"] not in READABLE_SCHEMAS:
        raise ArtifactError(
            f"{manifest_path}: schema version {manifest['schema_version']}, this runtime reads "
            f"{', '.join(map(str, READABLE_SCHEMAS))}"
        )
    model, tokenizer = (_verified(path, manifest, key) for key in ("model", "tokenizer"))
    try:
        tokenizer_text = tokenizer.decode()
    except UnicodeDecodeError:
        raise ArtifactError(f"{path / manifest['tokenizer']['file']}: not UTF-8 text") from None
    return manifest, model, tokenizer_text


def _verified(path: Path, manifest: dict, key: str) -> bytes:
    entry = manifest[key]
    file = path / str(entry.get("file", ""))
    if not file.is_file():
        raise ArtifactError(f"{file}: missing; the manifest names it as the {key}")
    data = file.read_bytes()  # hash and load the same bytes, so the file cannot change in between
    digest = sha256_bytes(data)
    if digest != entry.get("sha256"):
        raise ArtifactError(
            f"{file}: sha256 {digest[:16]}... does not match the manifest's {str(entry.get('sha256'))[:16]}...; "
            "the file was modified, truncated or replaced after export. Refusing to load it"
        )
    return data
