"""`sim2real keys`: the ed25519 key that signs promoted artifacts, and signing or verifying one by hand.

The private key lives outside the repository (default ~/.config/sim2real/keys/signing.key, or $SIM2REAL_KEY_DIR)
with mode 0600; its public half (signing.pub) is what robots trust (policy_node's `trusted_keys` parameter).
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from edge.signing import TrustPolicy

HELP = "Create and show the artifact signing key; sign or verify an artifact."
EXAMPLES = """examples:
  sim2real keys init                                   # ~/.config/sim2real/keys/signing.key (0600) + signing.pub
  sim2real keys show                                   # key id and the public key to copy to the robot
  sim2real keys sign policy/                           # sign a validated artifact (promotion does this itself)
  sim2real keys verify policy/ --trusted signing.pub   # what the robot checks before it loads the policy
"""


def add_trust_flags(p: argparse.ArgumentParser, request: type, fields: tuple[str, ...] | None = None) -> None:
    """edge.signing.TrustPolicy's fields (all, or those named) as flags: --trusted-keys, --allow-unsigned,
    --allow-unvalidated, with the fields' help, in a group that `request`'s own `trust` field describes (what its
    artifacts must pass)."""
    from edge.config import add_flags
    from edge.signing import TrustPolicy

    about = next(f for f in dataclasses.fields(request) if f.name == "trust").metadata["help"]
    width = shutil.get_terminal_size().columns - 4  # the subcommands' formatter prints descriptions as they are
    add_flags(p.add_argument_group("trust", textwrap.fill(about, max(width, 40))), TrustPolicy, fields)


def trust_policy(args: argparse.Namespace) -> TrustPolicy:
    """The TrustPolicy of the trust flags given (`add_trust_flags`); the ones not given keep their defaults."""
    from edge.config import flag_values
    from edge.signing import TrustPolicy

    return TrustPolicy(**flag_values(args, TrustPolicy))


def add_arguments(p: argparse.ArgumentParser) -> None:
    from edge.signing import DEFAULT_KEY

    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    init = sub.add_parser("init", help="create a signing key pair")
    init.add_argument(
        "--force",
        action="store_true",
        help="replace an existing key (artifacts it signed stay valid only where its public key stays trusted)",
    )
    show = sub.add_parser("show", help="print the key id and the public key")
    sign = sub.add_parser("sign", help="sign an artifact's manifest")
    sign.add_argument("artifact", help="artifact directory: a policy, or an exported instruction model")
    verify = sub.add_parser("verify", help="verify an artifact against trusted public keys")
    verify.add_argument("artifact", help="artifact directory: a policy, or an exported instruction model")
    verify.add_argument("--trusted", nargs="+", required=True, help="public key files or directories of *.pub")
    for s in (init, show, sign):
        s.add_argument("--key", default=str(DEFAULT_KEY), help="private key file (default %(default)s)")


def run(args: argparse.Namespace) -> int:
    from edge import signing

    if args.action == "init":
        kid = signing.generate_key(args.key, overwrite=args.force)
        print(f"key {kid}: private {args.key} (mode 0600), public {signing.public_path(args.key)}")
    elif args.action == "show":
        pub = signing.public_path(args.key)
        kid = next(iter(signing.load_public_keys([pub])))
        print(f"key {kid}: public key {pub}\n{pub.read_text().strip()}")
    elif args.action == "sign":
        kid = signing.sign_artifact(args.artifact, args.key)
        print(f"signed {Path(args.artifact) / signing.SIGNATURE_FILE} with key {kid}")
    else:
        print(f"{args.artifact}: {signing.require_signed(args.artifact, args.trusted).message}")
    return 0
