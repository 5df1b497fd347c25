"""A user recipe's build hash covers the modules beside it that it imports: editing one rebuilds."""
from __future__ import annotations

import pathlib

import pytest

from deployment_spec.builds import recipe_sources
from model_build import hashing


@pytest.fixture
def project(tmp_path, monkeypatch):
    files = {
        "scorer/__init__.py": "",
        "scorer/recipe.py": "import json\nimport torch\nfrom scorer.net import Net\nfrom . import text\n"
                            "from .layers import conv\n",
        "scorer/net.py": "from scorer.layers.conv import Conv\n",
        "scorer/text.py": "",
        "scorer/layers/__init__.py": "",
        "scorer/layers/conv.py": "from .. import shared\n",
        "scorer/shared.py": "",
        "scorer/unused.py": "",
        "beside.py": "",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def test_the_files_are_the_recipe_its_packages_and_what_it_imports_beside_it_transitively(project):
    root, found = recipe_sources.files("scorer.recipe")
    assert root == project.resolve()
    assert sorted(p.relative_to(root).as_posix() for p in found) == [
        "scorer/__init__.py", "scorer/layers/__init__.py", "scorer/layers/conv.py", "scorer/net.py",
        "scorer/recipe.py", "scorer/shared.py", "scorer/text.py"]  # not unused.py, beside.py, json or torch


def test_editing_a_module_the_recipe_imports_changes_its_hash_and_an_unused_one_does_not(project, tmp_path):
    hasher = hashing.FileHasher(tmp_path / "memo.json")
    before = hasher.module("scorer.recipe")
    (project / "scorer" / "unused.py").write_text("x = 1\n")
    assert hashing.FileHasher(tmp_path / "memo2.json").module("scorer.recipe") == before
    (project / "scorer" / "net.py").write_text("from scorer.layers.conv import Conv\nWIDTH = 2\n")
    # Before, only scorer/recipe.py was hashed and this edit shipped the model built before it.
    assert hashing.FileHasher(tmp_path / "memo3.json").module("scorer.recipe") != before


def test_a_module_that_is_not_found_is_unresolved(project, tmp_path):
    assert hashing.FileHasher(tmp_path / "memo.json").module("no_such_recipe_module") == "unresolved"
    assert recipe_sources.files("scorer.missing") is None


def test_a_recipe_in_an_installed_package_counts_only_its_own_package(project, monkeypatch):
    # In site-packages, `import torch` resolves beside the recipe too: walking it would read all of torch.
    monkeypatch.setattr(recipe_sources, "_installed_roots", lambda: {project.resolve()})
    (project / "torchlike").mkdir()
    (project / "torchlike" / "__init__.py").write_text("")
    (project / "scorer" / "text.py").write_text("import torchlike\nimport beside\n")
    root, found = recipe_sources.files("scorer.recipe")
    names = {p.relative_to(root).as_posix() for p in found}
    assert "scorer/text.py" in names and not {"torchlike/__init__.py", "beside.py"} & names
    monkeypatch.setattr(recipe_sources, "_installed_roots", lambda: set())
    assert {"torchlike/__init__.py", "beside.py"} <= {p.relative_to(root).as_posix()
                                                      for p in recipe_sources.files("scorer.recipe")[1]}


def test_a_recipe_beside_the_spec_is_found_without_sys_path_and_an_edit_makes_its_build_stale(project):
    # Synth and `tritonsm serve` look beside the spec, as the build does (deployment_spec.builds.model_sources), with no
    # sys.path of the build's: an edit to a module the recipe imports is told, an unused module's is not.
    import sys

    sys.path.remove(str(project))   # the fixture's monkeypatch puts sys.path back
    from deployment_spec.builds import model_sources
    from deployment_spec.builds.spec_match import build_problems
    from deployment_spec.builds.manifest import Artifact, EndpointArtifacts, Manifest, ModelEntry
    from mb_support import make_spec

    spec = make_spec(project, 'm: {backend: onnxruntime, source: {recipe: "scorer.recipe:exportable"}, '
                              'max_batch_size: 8}',
                     "ep: {kind: single-model, models: [m], instance_type: ml.g5.xlarge}")
    model = spec.models["m"]
    built = model_sources.sources(spec.root, model, model_sources.FileHasher())
    assert sorted(built.hashes) == ["recipe", "settings"] and built.hashes["recipe"] != "unresolved"
    manifest = Manifest(spec.triton_version, {"m": ModelEntry("m", "m", "onnxruntime", 8, (), (), "0" * 64,
                                                              sources=built.hashes, source_stamps=built.stamps)},
                        {"ep": EndpointArtifacts("single-model", (Artifact("ep-0.tar.gz", "0" * 64, 1, ("m",)),))})

    def problems() -> list[str]:
        return build_problems(spec.endpoints["ep"], spec.models, manifest, project / "manifest.json", spec.root)

    (project / "scorer" / "unused.py").write_text("x = 2\n")
    assert problems() == []
    (project / "scorer" / "net.py").write_text("from scorer.layers.conv import Conv\nWIDTH = 3\n")
    assert problems() == [
        "model 'm' is stale: its recipe's module scorer.recipe, or a module beside it that it imports, changed since "
        "the build, so its build serves the model as it was; run `tritonsm build` to rebuild it"]
