"""The CDK app synthesized from what `tritonsm build` really wrote (not the infra tests' fabricated
manifest): the tiny spec's built endpoints, every stage, cdk-nag included, pointing at the real tarballs."""
import json
import pathlib

import app as app_module  # sets JSII_NODE to the venv's Node before aws_cdk loads


def test_every_stage_synthesizes_from_the_real_manifest(tiny_build, tmp_path):
    import aws_cdk as cdk

    from deployment_spec.builds.manifest import load_manifest

    spec, out, _, report, _ = tiny_build
    manifest_path = out / "manifest.json"
    manifest = load_manifest(manifest_path)
    built = sorted(manifest.endpoints)
    assert built == ["multi", "single"]  # gpu-only holds a TensorRT plan: not built on this machine
    app = cdk.App(context=app_module.cdk_json_context(), outdir=str(tmp_path / "cdk.out"))
    app_module.build_app(spec, manifest, manifest_path, app=app, endpoints=built)
    assembly = app.synth()  # runs cdk-nag: any finding raises
    templates = {p.name: json.loads(p.read_text()) for p in pathlib.Path(assembly.directory).rglob("*.template.json")}
    copies = [r["Properties"] for t in templates.values() for r in t["Resources"].values()
              if r["Type"] == "Custom::TritonModelArtifact"]
    # Each real tarball is copied under its content-versioned name, with the manifest's sha256 and size,
    # once per environment of the spec.
    expected = {(a.object_name, a.sha256, str(a.size)) for name in built for a in manifest.endpoints[name].artifacts}
    assert {(c["DestinationKey"].rsplit("/", 1)[1], c["Sha256"], c["Size"]) for c in copies} == expected
    assert len(copies) == len(expected) * len(spec.environments)
    assert not any("gpu-only" in name for name in templates)
