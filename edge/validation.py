"""Whether an artifact may run: its manifest must carry a passing campaign verdict given to these ONNX bytes.

Robot-side (numpy only): policy_node and `sim2real loop` call require_validated before running a policy.
"""

from __future__ import annotations

from pathlib import Path

from edge.errors import ArtifactError
from edge.manifest import Manifest
from edge.signing import ArtifactCheck

VALIDATE_HINT = "sim2real validate {dir} --campaign config/campaigns/quick.yaml"


class UnvalidatedArtifactError(ArtifactError):
    """An artifact without a passing campaign verdict for its policy.onnx, loaded where that is required."""


def validation_problem(manifest: Manifest) -> str | None:
    """Why the artifact does not count as validated, or None when it does."""
    verdict = manifest.campaign_verdict
    if not verdict:
        return "it has no campaign verdict"
    if not verdict.get("passed"):
        failed = ", ".join(verdict.get("failed_checks") or []) or "unknown checks"
        return f"campaign {verdict.get('campaign')!r} failed it ({failed})"
    if verdict.get("policy_sha256") != manifest.policy["sha256"]:
        return "its verdict was given to other ONNX bytes (policy.onnx changed after validation)"
    return None


def require_validated(
    manifest: Manifest, allow_unvalidated: bool = False, artifact_dir: str | Path = "policy/"
) -> ArtifactCheck:
    """Raise UnvalidatedArtifactError unless the artifact passed a campaign; with allow_unvalidated the check has
    not passed and its message starts with UNVALIDATED."""
    problem = validation_problem(manifest)
    if problem is None:
        v = manifest.campaign_verdict
        assert v is not None, "validation_problem finds no verdict a problem"
        run = f"{v['backend']} ({v['episodes']} episodes, {v['validated_at']})"
        return ArtifactCheck(True, f"validated by campaign {v['campaign']!r} on {run}")
    if allow_unvalidated:
        return ArtifactCheck(False, f"UNVALIDATED artifact allowed by --allow-unvalidated: {problem}")
    raise UnvalidatedArtifactError(
        f"refusing artifact {artifact_dir}: {problem}. Validate it with `{VALIDATE_HINT.format(dir=artifact_dir)}`, "
        "or pass --allow-unvalidated to run it anyway"
    )
