"""Every feature flag the CDK recommends is configured in cdk.json, so a CDK upgrade that adds one
fails here, in the pull request that brings it, instead of changing deployed stacks later."""
import json
import pathlib

# Flags the CLI itself ignores in its notice (aws-cdk CLI, lib/commands/flags/operations.ts, OBSOLETE_FLAGS).
OBSOLETE = {"@aws-cdk/core:enableStackNameDuplicates", "@aws-cdk/aws-s3:grantWriteWithoutAcl",
            "@aws-cdk/aws-kms:defaultKeyPolicies"}
# Kept at another value than recommended on purpose (docs/reference/cdk-flags.md).
KEPT = {"@aws-cdk/core:defaultCrossStackReferences": "strong"}


def _flag_report(default_synth) -> dict:
    assembly = default_synth.app.synth()
    manifest = json.loads((pathlib.Path(assembly.directory) / "manifest.json").read_text())
    (report,) = [a for a in manifest["artifacts"].values() if a["type"] == "cdk:feature-flag-report"]
    return report["properties"]["flags"]


def test_no_recommended_flag_is_left_unconfigured(default_synth):
    flags = _flag_report(default_synth)
    # The CLI's rule for "N feature flags are not configured": no user value, and the value it
    # behaves like when unset differs from the recommended one.
    unconfigured = sorted(name for name, flag in flags.items()
                          if name not in OBSOLETE and "userValue" not in flag
                          and flag.get("unconfiguredBehavesLike", {}).get("v2", False) != flag.get("recommendedValue"))
    assert unconfigured == [], "set these in cdk.json (or keep one off with a reason in docs/reference/cdk-flags.md): " + \
        ", ".join(unconfigured)
    assert len(flags) > 80  # the report is the real one, not an empty section


def test_flags_differ_from_the_recommendation_only_where_the_readme_says_why(default_synth):
    flags = _flag_report(default_synth)
    differ = {name: flag["userValue"] for name, flag in flags.items()
              if "userValue" in flag and "recommendedValue" in flag and flag["userValue"] != flag["recommendedValue"]}
    assert differ == KEPT
