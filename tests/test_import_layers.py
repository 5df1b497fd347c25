"""The product code imports only downward, and no module imports itself round a circle.

Layers, bottom up: deployment_spec (the spec, manifest and runtime facts) → model_build,
triton_constructs, local_endpoint → stacks, what the commands run (tritonsm.checks → .serving,
.benchmarking → .comparing) → tritonsm.commands (one module per command) → tritonsm.cli, app.py, and the
scripts and development tooling in benchmarks/. Inside deployment_spec, bottom up: parsing → facts
(SageMaker's and Triton's) → sections (the spec's own) → rules (across sections) and cost, side by side
→ builds (what a build produced, and whether it matches the spec) → the loader and what reads it (spec.py,
json_schema.py, served.py). A layer is the longest dotted
prefix ALLOWED names, so tritonsm.benchmarking is a layer of its own below the rest of tritonsm; a layer
ALLOWED to import another may import the layers nested in it too. Every import statement counts, also
the ones inside functions (a lazy import is still a dependency).
"""
from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGES = ("deployment_spec", "model_build", "triton_constructs", "stacks", "local_endpoint", "tritonsm",
            "benchmarks")
# What each top-level package may import from the others (itself always).
ALLOWED = {
    "deployment_spec.parsing": set(),
    "deployment_spec.facts": {"deployment_spec.parsing"},
    "deployment_spec.sections": {"deployment_spec.parsing", "deployment_spec.facts"},
    "deployment_spec.rules": {"deployment_spec.parsing", "deployment_spec.facts", "deployment_spec.sections"},
    "deployment_spec.cost": {"deployment_spec.parsing", "deployment_spec.facts", "deployment_spec.sections"},
    "deployment_spec.builds": {"deployment_spec.parsing", "deployment_spec.facts", "deployment_spec.sections",
                               "deployment_spec.rules"},
    "deployment_spec": {"deployment_spec.parsing", "deployment_spec.facts", "deployment_spec.sections",
                        "deployment_spec.rules", "deployment_spec.cost", "deployment_spec.builds"},
    "model_build": {"deployment_spec"},
    "triton_constructs": {"deployment_spec"},
    "local_endpoint": {"deployment_spec", "model_build"},  # model_build.verification: the stand-ins' ONNX Runtime
    "stacks": {"deployment_spec", "triton_constructs"},
    # What the commands run, bottom up: checking (smoke's requests, signatures, verify --gpu), serving every endpoint,
    # measuring (bench: it sends smoke's requests), comparing variants (with the measuring code's statistics).
    "tritonsm.checks": {"deployment_spec", "model_build", "local_endpoint"},
    "tritonsm.serving": {"deployment_spec", "model_build", "local_endpoint", "tritonsm.checks"},
    "tritonsm.benchmarking": {"deployment_spec", "model_build", "local_endpoint", "tritonsm.checks"},
    "tritonsm.comparing": {"deployment_spec", "model_build", "local_endpoint", "tritonsm.benchmarking"},
    "tritonsm.commands": {"deployment_spec", "model_build", "local_endpoint", "tritonsm.benchmarking", "tritonsm.checks",
                          "tritonsm.comparing", "tritonsm.serving"},
    "tritonsm": {"deployment_spec", "model_build", "local_endpoint", "tritonsm.commands"},
    # The benchmark scripts and their tooling (tiny checkpoints, coverage runs): development only, nothing imports them.
    "benchmarks": {"deployment_spec", "model_build", "local_endpoint", "tritonsm"},
    "app": {"deployment_spec", "stacks", "triton_constructs"},
}
# Files that run elsewhere (Lambda, the Triton Python backend) and import nothing of ours.
ELSEWHERE = ("handlers", "stand_in_models")


def _modules(root: pathlib.Path) -> dict[str, pathlib.Path]:
    out = {}
    for package in PACKAGES:
        for path in (root / package).rglob("*.py"):
            if any(part in ELSEWHERE for part in path.parts):
                continue
            name = ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__")
            out[name] = path
    out["app"] = root / "app.py"
    return out


def _graph(root: pathlib.Path = ROOT) -> dict[str, set[str]]:
    modules = _modules(root)

    def ours(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and (node.module or node.level):
                # `from pkg import submodule` depends on the submodule; `from pkg import name` on pkg. A relative
                # import (stacks/: it ships under another name) counts as the absolute one it means.
                module = _absolute(node, name, path)
                subs = [f"{module}.{alias.name}" for alias in node.names]
                targets = [s for s in subs if s in modules]
                if len(targets) < len(subs):
                    targets.append(module)
            else:
                continue
            graph[name] |= {t for t in map(ours, targets) if t and t != name}
    return graph


def _absolute(node: ast.ImportFrom, name: str, path: pathlib.Path) -> str:
    """The module a `from ... import` names: ``from .x import y`` in stacks/stage.py is ``stacks.x``."""
    if not node.level:
        return str(node.module)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for _ in range(node.level - 1):
        package = package.rpartition(".")[0]
    return f"{package}.{node.module}" if node.module else package


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _layer(module: str) -> str:
    """The longest dotted prefix of ``module`` that ALLOWED names."""
    parts = module.split(".")
    return next(".".join(parts[:n]) for n in range(len(parts), 0, -1) if ".".join(parts[:n]) in ALLOWED)


def _wrong_layers(graph: dict[str, set[str]]) -> list[str]:
    wrong = []
    for module, targets in graph.items():
        layer = _layer(module)
        for target in targets:
            other = _layer(target)
            if other != layer and not any(other == a or other.startswith(a + ".") for a in ALLOWED[layer]):
                wrong.append(f"{module} imports {target}")
    return sorted(wrong)


def test_no_import_circles():
    graph = _graph()
    assert _cycles(graph) == []
    # The walk saw the product code: 142 modules and 485 imports of each other when this was written.
    assert len(graph) >= 120 and sum(map(len, graph.values())) >= 400, (len(graph), sum(map(len, graph.values())))


def test_the_cycle_finder_finds_a_circle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_each_layer_imports_only_downward():
    assert _wrong_layers(_graph()) == []


def test_the_walk_finds_a_planted_upward_import_and_circle(tmp_path):
    # The twin: a tree with one import up the layers, inside a function (a lazy import still counts), which
    # also closes a circle with the construct that imports the spec.
    for name, text in {"app.py": "", "deployment_spec/__init__.py": "", "triton_constructs/__init__.py": "",
                       "deployment_spec/spec.py": "def load():\n    from triton_constructs import model\n",
                       "triton_constructs/model.py": "from deployment_spec import spec\n"}.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    graph = _graph(tmp_path)
    assert _wrong_layers(graph) == ["deployment_spec.spec imports triton_constructs.model"]
    assert _cycles(graph) == [["deployment_spec.spec", "triton_constructs.model"]]


def test_the_spec_s_rooms_import_one_way():
    # The twin for deployment_spec's rooms: a section importing a cross-section rule, a rule importing the
    # cost, a fact importing the loader (through the package's face) are each reported; the loader importing
    # them all and model_build importing a section are not.
    graph = {"deployment_spec.sections.model": {"deployment_spec.rules.cross_section"},
             "deployment_spec.rules.sagemaker": {"deployment_spec.cost.figures", "deployment_spec.facts.images"},
             "deployment_spec.facts.instances": {"deployment_spec"},
             "deployment_spec.spec": {"deployment_spec.rules.cross_section", "deployment_spec.cost.figures"},
             "model_build.dispatch": {"deployment_spec.sections.model"}}
    assert _wrong_layers(graph) == ["deployment_spec.facts.instances imports deployment_spec",
                                    "deployment_spec.rules.sagemaker imports deployment_spec.cost.figures",
                                    "deployment_spec.sections.model imports deployment_spec.rules.cross_section"]


def test_the_measuring_code_may_not_import_the_cli_around_it():
    # The twin for the nested layers: the measuring code importing the CLI or a command, and the product importing
    # the development tooling, are reported, not taken as imports inside one package; a command importing the
    # measuring code is fine.
    graph = {"tritonsm.benchmarking.drain": {"tritonsm.cli", "tritonsm.commands.options"},
             "tritonsm.commands.bench": {"tritonsm.benchmarking.drain"},
             "tritonsm.checks.gpu.run": {"benchmarks.tooling.tiny_checkpoints"}}
    assert _wrong_layers(graph) == ["tritonsm.benchmarking.drain imports tritonsm.cli",
                                    "tritonsm.benchmarking.drain imports tritonsm.commands.options",
                                    "tritonsm.checks.gpu.run imports benchmarks.tooling.tiny_checkpoints"]


def test_relative_imports_count_as_the_modules_they_name(tmp_path):
    # The twin for stacks/'s relative imports: a circle closed by `from .b import x` and `from . import a`, and a
    # relative import up a level, are seen as stacks.b, stacks.a and stacks.
    for name, text in {"app.py": "", "stacks/__init__.py": "from .a import x\n", "stacks/a.py": "from .b import y\n",
                       "stacks/b.py": "from . import a\n", "stacks/sub/__init__.py": "",
                       "stacks/sub/c.py": "from .. import b\n"}.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    graph = _graph(tmp_path)
    assert graph["stacks"] == {"stacks.a"} and graph["stacks.sub.c"] == {"stacks.b"}
    assert _cycles(graph) == [["stacks.a", "stacks.b"]]
