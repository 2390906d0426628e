"""Signed artifacts: a promoted artifact's manifest (gains, limits, verdict, ONNX sha256) is covered by an ed25519
signature; the robot refuses anything else unless told allow_unsigned, which says WARN."""

import dataclasses
import json
import os
import subprocess
import sys

import pytest

from edge import signing
from edge.manifest import MANIFEST_FILE
from tests.campaign_helpers import export_rover_policy


@pytest.fixture
def keys(tmp_path):
    key = tmp_path / "keys" / "signing.key"
    kid = signing.generate_key(key)
    return key, signing.public_path(key), kid


@pytest.fixture
def signed(tmp_path, keys):
    artifact = export_rover_policy(tmp_path / "policy")
    assert signing.sign_artifact(artifact, keys[0]) == keys[2]
    return artifact


def test_key_files_and_id(keys):
    key, pub, kid = keys
    assert oct(os.stat(key).st_mode & 0o777) == "0o600"
    assert list(signing.load_public_keys([pub])) == [kid] and len(kid) == 16
    with pytest.raises(signing.SigningKeyError, match="refusing to overwrite"):
        signing.generate_key(key)
    os.chmod(key, 0o644)
    with pytest.raises(signing.SigningKeyError, match="readable by other users"):
        signing.load_private_key(key)


def test_signed_artifact_verifies(signed, keys):
    assert signing.verify_artifact(signed, signing.load_public_keys([keys[1]])) == keys[2]
    assert signing.require_signed(signed, [keys[1].parent]) == signing.ArtifactCheck(
        passed=True, message=f"signed by trusted key {keys[2]}"
    )


@pytest.mark.parametrize(
    "forge",
    [
        lambda m: m["control"].update(kd=[v * 10 for v in m["control"]["kd"]]),
        lambda m: m["command_limits"].update(vx=[-5.0, 5.0]),
        lambda m: m.update(campaign_verdict={"passed": True, "campaign": "forged"}),
        lambda m: m["policy"].update(sha256="0" * 64),
    ],
    ids=["pd_gains", "command_limits", "verdict", "onnx_sha256"],
)
def test_forged_manifest_is_refused(signed, keys, forge):
    path = signed / MANIFEST_FILE
    original = path.read_text()
    manifest = json.loads(original)
    forge(manifest)
    assert manifest != json.loads(original)
    path.write_text(json.dumps(manifest, indent=1))
    with pytest.raises(signing.SignatureError, match="does not match manifest.json"):
        signing.require_signed(signed, [keys[1]])


def test_unsigned_and_untrusted_are_refused_unless_allowed(tmp_path, signed, keys):
    other = tmp_path / "other" / "signing.key"
    signing.generate_key(other)
    with pytest.raises(signing.SignatureError, match="not a trusted key"):
        signing.require_signed(signed, [signing.public_path(other)])
    (signed / signing.SIGNATURE_FILE).unlink()
    with pytest.raises(signing.SignatureError, match="not signed"):
        signing.require_signed(signed, [keys[1]])
    check = signing.require_signed(signed, [keys[1]], allow_unsigned=True)
    assert (
        not check.passed
        and check.message.startswith("WARN unsigned artifact allowed")
        and "not signed" in check.message
    )


def test_each_verdict_on_an_artifact_that_may_run_has_its_fields(tmp_path, signed, keys):
    """Signed by a trusted key: passed; a fresh export at re-validation: not checked (None); unsigned, untrusted or
    with no trusted keys but allowed (development): not passed, with the reason after WARN; the check is frozen."""
    fresh = export_rover_policy(tmp_path / "fresh")
    other = tmp_path / "other" / "signing.key"
    signing.generate_key(other)
    assert signing.verify_if_promoted(signed, [keys[1]]) == signing.ArtifactCheck(
        True, f"signed by trusted key {keys[2]}"
    )
    assert signing.verify_if_promoted(fresh, [keys[1]]) is None
    waived = {
        "it is not signed": signing.require_signed(fresh, [keys[1]], allow_unsigned=True),
        "which is not a trusted key": signing.require_signed(signed, [signing.public_path(other)], allow_unsigned=True),
        "no trusted public keys": signing.require_signed(signed, [], allow_unsigned=True),
    }
    for reason, check in waived.items():
        assert not check.passed and check.message.startswith("WARN unsigned artifact allowed"), check
        assert reason in check.message
    with pytest.raises(dataclasses.FrozenInstanceError):
        waived["it is not signed"].passed = True


@pytest.mark.parametrize(
    "content", ["", "{}", "not json", '{"key_id": "x", "signature": "!!", "algorithm": "ed25519"}']
)
def test_malformed_signature_file_is_refused(signed, keys, content):
    (signed / signing.SIGNATURE_FILE).write_text(content)
    with pytest.raises(signing.SignatureError, match="malformed|not a trusted key"):
        signing.require_signed(signed, [keys[1]])


def test_keys_cli_round_trip(tmp_path):
    artifact = export_rover_policy(tmp_path / "policy")
    key = tmp_path / "k" / "signing.key"

    def cli(*argv):
        return subprocess.run([sys.executable, "-m", "sim2real", "keys", *argv], capture_output=True, text=True)

    assert cli("init", "--key", str(key)).returncode == 0
    assert cli("init", "--key", str(key)).returncode == 2  # refuses to overwrite, in one line
    assert cli("sign", str(artifact), "--key", str(key)).returncode == 0
    ok = cli("verify", str(artifact), "--trusted", str(signing.public_path(key)))
    assert ok.returncode == 0 and "signed by trusted key" in ok.stdout
    (artifact / MANIFEST_FILE).write_text((artifact / MANIFEST_FILE).read_text().replace('"rover"', '"rovers"', 1))
    bad = cli("verify", str(artifact), "--trusted", str(signing.public_path(key)))
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "does not match" in bad.stderr


def test_a_new_verdict_drops_the_signature_of_the_old_manifest(signed):
    from edge.manifest import record_verdict

    record_verdict(signed, None)  # the manifest changed: the signature over it no longer holds
    assert not (signed / signing.SIGNATURE_FILE).exists()


def test_policy_node_refuses_unsigned_and_runs_signed_artifacts(tmp_path, keys, signed):
    """policy_node over DDS: by default an unsigned artifact fails configure with one line; one signed by a trusted
    key is loaded; allow_unsigned runs the unsigned one with a WARN."""
    from tests.ros_helpers import node_process

    unsigned = export_rover_policy(tmp_path / "unsigned")
    cases = [
        ((f"artifact:={unsigned}", f"trusted_keys:={keys[1]}"), "it is not signed"),
        ((f"artifact:={signed}", f"trusted_keys:={keys[1]}"), f"signed by trusted key {keys[2]}"),
        ((f"artifact:={unsigned}", f"trusted_keys:={keys[1]}", "allow_unsigned:=true"), "WARN unsigned artifact"),
    ]
    for params, expect in cases:
        with node_process("ros_nodes.policy_node", *params, "allow_unvalidated:=true") as proc:
            assert proc.wait_for_output(expect, timeout=30), proc.output
            assert proc.poll() is None  # a refused artifact leaves the node up, unconfigured


def test_campaign_verifies_a_promoted_artifact_before_it_runs(tmp_path, keys):
    """Re-validation: a campaign promotes and signs; re-running it on the signed artifact verifies the signature
    first (a hand-edited manifest or an untrusted key is refused before any episode runs); with trusted keys
    required, an approved but unsigned artifact is refused too; allow_unsigned runs it with a WARN."""
    import yaml

    from sim.campaign.config import load_campaign
    from sim.campaign.runner import CampaignRequest, run_campaign
    from tests.campaign_helpers import TINY_CAMPAIGN

    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(TINY_CAMPAIGN))
    cfg = load_campaign(tmp_path / "tiny.yaml")
    artifact = export_rover_policy(tmp_path / "policy")
    first = run_campaign(CampaignRequest(artifact, cfg, tmp_path / "v1", signing_key=keys[0]))
    assert first.passed and first.verdict["signed_by"] == keys[2]
    assert first.summary["signatures"][str(artifact)] == "unsigned (not promoted)"  # a fresh export: nothing to check

    trusted = signing.TrustPolicy([keys[1]])
    again = run_campaign(CampaignRequest(artifact, cfg, tmp_path / "v2", promote_verdict=False, trust=trusted))
    assert again.summary["signatures"][str(artifact)] == f"signed by trusted key {keys[2]}"
    with pytest.raises(signing.SignatureError, match="give the trusted public keys"):
        run_campaign(
            CampaignRequest(artifact, cfg, tmp_path / "v3", promote_verdict=False)
        )  # signed, nothing to verify
    other = tmp_path / "other" / "signing.key"
    signing.generate_key(other)
    with pytest.raises(signing.SignatureError, match="not a trusted key"):
        run_campaign(
            CampaignRequest(artifact, cfg, tmp_path / "v4", trust=signing.TrustPolicy([signing.public_path(other)]))
        )

    path = artifact / MANIFEST_FILE
    manifest = json.loads(path.read_text())
    manifest["command_limits"]["vx"] = [-5.0, 5.0]
    path.write_text(json.dumps(manifest, indent=1))
    with pytest.raises(signing.SignatureError, match="does not match manifest.json"):
        run_campaign(CampaignRequest(artifact, cfg, tmp_path / "v5", trust=trusted))
    assert not (tmp_path / "v5").exists()  # refused before anything ran or was written

    (artifact / signing.SIGNATURE_FILE).unlink()  # approved (passing verdict in the manifest), unsigned
    with pytest.raises(signing.SignatureError, match="not signed"):
        run_campaign(CampaignRequest(artifact, cfg, tmp_path / "v6", promote_verdict=False, trust=trusted))
    with pytest.warns(UserWarning, match="WARN unsigned artifact allowed"):
        waived = signing.TrustPolicy([keys[1]], allow_unsigned=True)
        run_campaign(CampaignRequest(artifact, cfg, tmp_path / "v7", promote_verdict=False, trust=waived))
