"""Reading a policy artifact directory with its integrity checks: the ONNX bytes a runtime loads are the bytes
whose sha256 the manifest records, and the model's input/output shapes are the manifest's."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from edge.errors import ArtifactError
from edge.fileio import sha256_bytes
from edge.manifest import Manifest, load_manifest

Shape = Sequence[int | str | None]


def read_artifact(artifact_dir: str | Path) -> tuple[Manifest, bytes]:
    """The validated manifest and the ONNX bytes it vouches for; ArtifactError on any mismatch."""
    manifest = load_manifest(artifact_dir)
    path = Path(artifact_dir) / manifest.policy["file"]
    if not path.is_file():
        raise ArtifactError(f"{path}: missing; the manifest names it as the policy")
    data = path.read_bytes()  # hash and load the same bytes, so the file cannot change in between
    digest = sha256_bytes(data)
    if digest != manifest.policy["sha256"]:
        raise ArtifactError(
            f"{path}: sha256 {digest[:16]}... does not match the manifest's {str(manifest.policy['sha256'])[:16]}...; "
            "the file was modified, truncated or replaced after export. Refusing to load it"
        )
    return manifest, data


def _is_dynamic(dim: int | str | None) -> bool:
    # ONNX Runtime reports a symbolic dimension as a name or None, TensorRT as -1
    return not isinstance(dim, int) or dim < 0


def check_io(
    manifest: Manifest, inputs: Sequence[tuple[str, Shape]], outputs: Sequence[tuple[str, Shape]], source: str
) -> None:
    """Refuse a model whose single input/output are not [batch, obs_dim] / [batch, action_dim] as named."""
    expected = (
        ("input", inputs, manifest.policy["input"], manifest.obs_dim),
        ("output", outputs, manifest.policy["output"], manifest.action_dim),
    )
    for kind, got, name, dim in expected:
        if len(got) != 1:
            raise ArtifactError(f"{source}: expected one {kind} {name!r}, found {[n for n, _ in got]}")
        got_name, shape = got[0]
        shape = list(shape)
        if got_name != name or len(shape) != 2 or shape[1] != dim or not _is_dynamic(shape[0]):
            raise ArtifactError(
                f"{source}: {kind} {got_name!r} has shape {shape}, the manifest expects {name!r} "
                f"[batch, {dim}] with a dynamic batch dimension"
            )
