"""Signed artifacts: an ed25519 signature over manifest.json, which carries the sha256 of policy.onnx and the
campaign verdict, so neither the weights nor the gains, limits or verdict can change without the robot noticing.

Promotion signs (`sign_artifact`); robot-side loaders verify against a list of trusted public keys
(`require_signed`). Keys are PEM files: the private key (PKCS#8) lives outside the repository with mode 0600, the
public key beside it as `<name>.pub`. A key's id is the first 16 hex digits of the sha256 of its raw public bytes.
The signature file holds the key id, the manifest's sha256 and the signature over a domain-separated message.
"""

from __future__ import annotations

import base64
import json
import os
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from edge.config import setting
from edge.errors import ArtifactError, EdgeError
from edge.fileio import atomic_write_bytes, sha256_bytes
from edge.manifest import MANIFEST_FILE, SIGNATURE_FILE

if TYPE_CHECKING:  # cryptography is imported when a key is used (the robot extra brings it)
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

SCHEMA_VERSION = 1
DOMAIN = b"sim2real-artifact-signature-v1\n"  # a signature over a manifest is never valid for anything else
DEFAULT_KEY_DIR = Path(os.environ.get("SIM2REAL_KEY_DIR", Path.home() / ".config" / "sim2real" / "keys"))
DEFAULT_KEY = DEFAULT_KEY_DIR / "signing.key"


class SignatureError(ArtifactError):
    """An artifact whose signature is missing, malformed, from an untrusted key, or does not match its manifest."""


class SigningKeyError(EdgeError):
    """A signing or public key file that cannot be used (missing, malformed, readable by others)."""


@dataclass(frozen=True)
class ArtifactCheck:
    """The outcome of a robot-side check that let an artifact run (its signature here, its campaign verdict in
    edge.validation): `passed`, or failed but waived by a development switch (allow_unsigned, allow_unvalidated),
    which the caller logs as a warning. A check that refuses raises instead. `message` is the one line to log."""

    passed: bool
    message: str


@dataclass(frozen=True)
class TrustPolicy:
    """What the robot-side checks accept: the keys an artifact must be signed by and the two development switches
    that waive a check with a warning instead of refusing. One value travels from the command line to the checks
    (require_signed here, edge.validation.require_validated) and to the nodes' parameters."""

    trusted_keys: tuple[Path, ...] = setting((), "public keys (PEM files or directories of *.pub) to verify against")
    allow_unsigned: bool = setting(False, "run an unsigned or wrongly signed artifact, with a WARN (development only)")
    allow_unvalidated: bool = setting(False, "run an artifact without a passing campaign verdict (development only)")

    def __post_init__(self) -> None:
        # callers hand over what argparse or a YAML gives (lists of str); the policy holds paths, and stays hashable
        object.__setattr__(self, "trusted_keys", tuple(Path(k) for k in self.trusted_keys))

    def resolved(self) -> TrustPolicy:
        """The policy with absolute key paths: for processes that start in another directory."""
        return replace(self, trusted_keys=tuple(k.resolve() for k in self.trusted_keys))

    def or_signer(self, signing_key: str | Path | None) -> TrustPolicy:
        """Without trusted keys, the public half of `signing_key` (the key promotion signs with) is the trusted one."""
        if self.trusted_keys or signing_key is None:
            return self
        return replace(self, trusted_keys=(public_path(signing_key),))

    def check_signed(self, artifact_dir: str | Path) -> ArtifactCheck:
        return require_signed(artifact_dir, self.trusted_keys, self.allow_unsigned)

    def check_if_promoted(self, artifact_dir: str | Path) -> ArtifactCheck | None:
        return verify_if_promoted(artifact_dir, self.trusted_keys, self.allow_unsigned)

    def signature_parameters(self) -> dict[str, str]:
        """The nodes' trusted_keys and allow_unsigned parameters ('' is written '' on a ros2 command line)."""
        return {
            "trusted_keys": ",".join(str(k) for k in self.trusted_keys) or "''",
            "allow_unsigned": str(self.allow_unsigned).lower(),
        }


def _ed25519():
    from cryptography.hazmat.primitives.asymmetric import ed25519

    return ed25519


def _serialization():
    from cryptography.hazmat.primitives import serialization

    return serialization


def public_path(private_key: str | Path) -> Path:
    return Path(private_key).with_suffix(".pub")


def key_id(public_key) -> str:
    s = _serialization()
    raw = public_key.public_bytes(s.Encoding.Raw, s.PublicFormat.Raw)
    return sha256_bytes(raw)[:16]


def generate_key(private_key: str | Path = DEFAULT_KEY, overwrite: bool = False) -> str:
    """Write a new ed25519 key pair (private mode 0600, public beside it as .pub); returns its key id."""
    private_key = Path(private_key)
    if private_key.exists() and not overwrite:
        raise SigningKeyError(f"{private_key} exists: refusing to overwrite a signing key (pass --force to replace it)")
    s = _serialization()
    key = _ed25519().Ed25519PrivateKey.generate()
    private_pem = key.private_bytes(s.Encoding.PEM, s.PrivateFormat.PKCS8, s.NoEncryption())
    public_pem = key.public_key().public_bytes(s.Encoding.PEM, s.PublicFormat.SubjectPublicKeyInfo)
    private_key.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    atomic_write_bytes(private_key, private_pem, mode=0o600)
    atomic_write_bytes(public_path(private_key), public_pem)
    return key_id(key.public_key())


def load_private_key(path: str | Path = DEFAULT_KEY):
    """The signing key; refused when group or others may read it (as ssh refuses such a key)."""
    path = Path(path)
    if not path.is_file():
        raise SigningKeyError(f"no signing key at {path}: create one with `sim2real keys init --key {path}`")
    if stat.S_IMODE(path.stat().st_mode) & 0o077:
        raise SigningKeyError(f"{path} is readable by other users: `chmod 600 {path}`")
    try:
        key = _serialization().load_pem_private_key(path.read_bytes(), password=None)
    except (ValueError, TypeError) as e:
        raise SigningKeyError(f"{path}: not a PEM private key ({e})") from None
    if not isinstance(key, _ed25519().Ed25519PrivateKey):
        raise SigningKeyError(f"{path}: not an ed25519 key")
    return key


def load_public_keys(paths: Iterable[str | Path]) -> dict[str, Ed25519PublicKey]:
    """Trusted public keys by key id, from PEM files or directories of *.pub files."""
    keys: dict[str, Ed25519PublicKey] = {}
    for entry in paths:
        entry = Path(entry)
        files = sorted(entry.glob("*.pub")) if entry.is_dir() else [entry]
        if not files or not all(f.is_file() for f in files):
            raise SigningKeyError(f"trusted key {entry}: no such public key file (or no *.pub in that directory)")
        for f in files:
            try:
                key = _serialization().load_pem_public_key(f.read_bytes())
            except (ValueError, TypeError) as e:
                raise SigningKeyError(f"{f}: not a PEM public key ({e})") from None
            if not isinstance(key, _ed25519().Ed25519PublicKey):
                raise SigningKeyError(f"{f}: not an ed25519 public key")
            keys[key_id(key)] = key
    return keys


def sign_artifact(artifact_dir: str | Path, private_key: str | Path = DEFAULT_KEY) -> str:
    """Sign the artifact's manifest as it is now (after its verdict is written); returns the key id."""
    key = load_private_key(private_key)
    manifest = _manifest_bytes(artifact_dir)
    body = {
        "schema_version": SCHEMA_VERSION,
        "algorithm": "ed25519",
        "key_id": key_id(key.public_key()),
        "manifest_sha256": sha256_bytes(manifest),
        "signature": base64.b64encode(key.sign(DOMAIN + manifest)).decode(),
    }
    atomic_write_bytes(Path(artifact_dir) / SIGNATURE_FILE, (json.dumps(body, indent=1) + "\n").encode())
    return body["key_id"]


def verify_artifact(artifact_dir: str | Path, trusted: Mapping[str, Ed25519PublicKey]) -> str:
    """The key id that signed the artifact's manifest; SignatureError unless a trusted key did."""
    from cryptography.exceptions import InvalidSignature

    path = Path(artifact_dir) / SIGNATURE_FILE
    if not path.is_file():
        raise SignatureError(f"refusing artifact {artifact_dir}: it is not signed (no {SIGNATURE_FILE} file)")
    try:
        body = json.loads(path.read_text())
        kid, signature = str(body["key_id"]), base64.b64decode(body["signature"], validate=True)
        if body.get("algorithm") != "ed25519":
            raise ValueError(f"algorithm {body.get('algorithm')!r}")
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as e:
        raise SignatureError(f"refusing artifact {artifact_dir}: malformed {SIGNATURE_FILE} ({e})") from None
    if kid not in trusted:
        raise SignatureError(f"refusing artifact {artifact_dir}: signed by key {kid}, which is not a trusted key")
    try:
        trusted[kid].verify(signature, DOMAIN + _manifest_bytes(artifact_dir))
    except InvalidSignature:
        raise SignatureError(
            f"refusing artifact {artifact_dir}: its signature does not match {MANIFEST_FILE} (changed after signing)"
        ) from None
    return kid


def trusted_key_paths(spec: str) -> list[str]:
    """A parameter's comma-separated public key files or directories as a list ("" -> none)."""
    return [p.strip() for p in spec.split(",") if p.strip()]


def require_signed(
    artifact_dir: str | Path, trusted_keys: Iterable[str | Path], allow_unsigned: bool = False
) -> ArtifactCheck:
    """Verify the artifact against the trusted public keys. With allow_unsigned (development only) a missing or bad
    signature is reported, not refused: the check then has not passed and its message starts with WARN."""
    if not Path(artifact_dir).is_dir():  # a mistyped path is not an unsigned artifact (nor allowed as one)
        raise ArtifactError(f"no such artifact directory: {artifact_dir}")
    try:
        trusted_keys = list(trusted_keys)
        if not trusted_keys:
            raise SignatureError(f"refusing artifact {artifact_dir}: no trusted public keys given to verify it against")
        kid = verify_artifact(artifact_dir, load_public_keys(trusted_keys))
    except (SignatureError, SigningKeyError) as e:
        if allow_unsigned:
            return ArtifactCheck(False, f"WARN unsigned artifact allowed (allow_unsigned, development only): {e}")
        raise
    return ArtifactCheck(True, f"signed by trusted key {kid}")


def verify_if_promoted(
    artifact_dir: str | Path, trusted_keys: Iterable[str | Path], allow_unsigned: bool = False
) -> ArtifactCheck | None:
    """Re-validation's check. A signed artifact must verify against the trusted keys; with trusted keys given, an
    approved one (a passing campaign verdict) must be signed too, or its approval could be a hand edit. A fresh
    export (no verdict, no signature) is not checked (None): validation is what promotes it."""
    from edge.manifest import load_manifest

    trusted_keys = list(trusted_keys)
    signed = (Path(artifact_dir) / SIGNATURE_FILE).is_file()
    approved = bool((load_manifest(artifact_dir).campaign_verdict or {}).get("passed"))
    if not signed and not (approved and trusted_keys):
        return None
    if not trusted_keys and not allow_unsigned:
        raise SignatureError(
            f"refusing artifact {artifact_dir}: it is signed (promoted); give the trusted public keys to verify it "
            "against (--trusted-keys KEY.pub)"
        )
    return require_signed(artifact_dir, trusted_keys, allow_unsigned)


def _manifest_bytes(artifact_dir: str | Path) -> bytes:
    path = Path(artifact_dir) / MANIFEST_FILE
    if not path.is_file():
        raise ArtifactError(
            f"{path}: no manifest here; is {artifact_dir} an artifact (policy or exported instruction model) directory?"
        )
    return path.read_bytes()
