"""Export a trained actor to a policy artifact: policy.onnx (observation normaliser inside) plus manifest.json.

Runs on the training side (torch, onnx, onnxscript); imports them only when called.
"""

from __future__ import annotations

import copy
import logging
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import onnxruntime as ort

from edge.errors import ArtifactError
from edge.fileio import atomic_write_bytes, sha256_bytes
from edge.manifest import (
    INPUT_NAME,
    ONNX_FILE,
    OUTPUT_NAME,
    ActionLimits,
    Manifest,
    build_manifest,
    write_manifest,
)
from edge.observation import ObsTerm, obs_term

OPSET = 18
PARITY_ATOL = 1e-4  # export refuses an ONNX file that disagrees with the torch module by more than this


def export_policy(
    actor,
    robot: Mapping,
    obs_terms: Sequence[ObsTerm] | None,
    out_dir: str | Path,
    *,
    run_id: str,
    limits: ActionLimits | None = None,
) -> Manifest:
    """Write `out_dir/policy.onnx` and `out_dir/manifest.json` and return the manifest.

    actor: an rsl_rl MLPModel (exported through its `as_onnx()`, which holds the normaliser and the deterministic
        output) or any torch module mapping obs [batch, obs_dim] -> actions [batch, num_joints].
    robot: sim.robot.RobotSpec.to_dict().
    obs_terms: the observation layout in order; None takes robot["observations"] through edge.observation.obs_term.
    limits: the target limits, the training's action clip and the rate limit (edge.manifest.ActionLimits); None:
        none of them, which only a torque robot (bounded by its torque limits) can be exported with.
    """
    import onnx
    import torch

    n = len(robot["joints"])
    limits = limits or ActionLimits()
    limits.per_joint(robot)  # fail before the slow export, not after it
    terms = list(obs_terms) if obs_terms is not None else [obs_term(name, n) for name in robot["observations"]]
    obs_dim = sum(t.size for t in terms)
    module = actor.as_onnx(verbose=False) if hasattr(actor, "as_onnx") else copy.deepcopy(actor)
    module = module.to("cpu").eval()

    probe = torch.randn(256, obs_dim, generator=torch.Generator().manual_seed(0)) * 2.0
    with torch.inference_mode():
        expected = module(probe)
    if tuple(expected.shape) != (256, n):
        raise ValueError(f"actor maps [batch, {obs_dim}] to {list(expected.shape[1:])}, expected [{n}] (one per joint)")

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # torch.export's own deprecation notices, not ours to fix
        logging.getLogger("torch.onnx._internal.exporter._registration").setLevel(logging.ERROR)  # "torchvision..."
        program = torch.onnx.export(
            module,
            (probe[:2],),  # batch 2: a size-1 example dimension would be specialised to a constant
            input_names=[INPUT_NAME],
            output_names=[OUTPUT_NAME],
            dynamic_shapes=({0: torch.export.Dim("batch")},),
            opset_version=OPSET,
            dynamo=True,
            verbose=False,
        )
    proto = program.model_proto
    onnx.checker.check_model(proto, full_check=True)
    onnx_bytes = proto.SerializeToString()
    _check_parity(onnx_bytes, probe.numpy(), expected.numpy())

    manifest = build_manifest(
        robot,
        terms,
        onnx_sha256=sha256_bytes(onnx_bytes),
        run_id=run_id,
        opset=OPSET,
        limits=limits,
    )
    out = Path(out_dir)
    # ONNX first, manifest second: in between, a reader sees a hash mismatch and refuses, never a wrong pairing
    atomic_write_bytes(out / ONNX_FILE, onnx_bytes)
    write_manifest(out, manifest)
    return manifest


def _check_parity(onnx_bytes: bytes, obs: np.ndarray, expected: np.ndarray) -> None:
    session = ort.InferenceSession(onnx_bytes, providers=["CPUExecutionProvider"])
    got = session.run([OUTPUT_NAME], {INPUT_NAME: obs})[0]
    err = float(np.max(np.abs(got - expected)))
    if not err <= PARITY_ATOL:
        raise ArtifactError(f"exported ONNX differs from the torch actor by {err:.3g} (> {PARITY_ATOL}); not written")
