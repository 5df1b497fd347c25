"""Operators computed in float64 that the served ONNX Runtime has no float64 kernel for (model_build/onnx_graph/
double_ops.py): rewritten to compute in float32 between Casts, the rest of the graph untouched, and the result
loads and answers in the serving runtime of Triton 25.09 (onnxruntime 1.23.0), which refuses the graph as
exported."""
from __future__ import annotations

import pathlib

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from model_build.onnx_graph import double_ops
from model_build.verification import side_env


def _graph(*ops: str, dtype: int = TensorProto.DOUBLE) -> onnx.ModelProto:
    """x (float32) -> Cast to ``dtype`` -> each op in turn -> Cast to float32 -> y."""
    nodes = [helper.make_node("Cast", ["x"], ["t0"], to=dtype, name="widen")]
    for n, op in enumerate(ops):
        nodes.append(helper.make_node(op, [f"t{n}"], [f"t{n + 1}"], name=f"{op.lower()}_{n}"))
    nodes.append(helper.make_node("Cast", [f"t{len(ops)}"], ["y"], to=TensorProto.FLOAT, name="narrow"))
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n"])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)


def test_each_operator_without_a_double_kernel_computes_in_float32_between_casts():
    model = _graph("Sin", "Cos", "Exp", "Erf")
    assert double_ops.narrow(model) == ["Cos", "Erf"]
    onnx.checker.check_model(model, full_check=True)
    kinds = [(n.op_type, dict((a.name, a.i) for a in n.attribute).get("to")) for n in model.graph.node]
    assert kinds == [("Cast", TensorProto.DOUBLE), ("Sin", None),
                     ("Cast", TensorProto.FLOAT), ("Cos", None), ("Cast", TensorProto.DOUBLE),
                     ("Exp", None),
                     ("Cast", TensorProto.FLOAT), ("Erf", None), ("Cast", TensorProto.DOUBLE),
                     ("Cast", TensorProto.FLOAT)]
    assert double_ops.narrow(model) == []  # nothing left to narrow: a second pass changes nothing


def test_a_float32_graph_is_left_as_it_is():
    model = _graph("Cos", "Erf", dtype=TensorProto.FLOAT)
    before = model.SerializeToString()
    assert double_ops.narrow(model) == []
    assert model.SerializeToString() == before


def test_the_narrowed_graph_answers_in_the_served_runtime_which_refuses_the_exported_one(tmp_path):
    runtime = side_env.ensure("onnxruntime", "1.23.0", log=lambda _: None)
    exported, narrowed = tmp_path / "exported.onnx", tmp_path / "narrowed.onnx"
    onnx.save(_graph("Cos", "Sin"), str(exported))
    model = _graph("Cos", "Sin")
    double_ops.narrow(model)
    onnx.save(model, str(narrowed))
    x = np.linspace(-40, 40, 101, dtype=np.float32)
    answers = _run(runtime, [exported, narrowed], x, tmp_path)
    assert "Could not find an implementation for Cos(7) node with name 'cos_0'" in answers[0]
    np.testing.assert_allclose(np.asarray(answers[1]), np.sin(np.cos(x.astype(np.float64))), atol=1e-6)


def _run(runtime: side_env.SideEnv, graphs: list[pathlib.Path], x: np.ndarray, tmp_path: pathlib.Path) -> list:
    import json
    import subprocess
    import sys

    script = tmp_path / "run.py"
    script.write_text(
        "import json, sys\n"
        f"sys.path.insert(0, {str(runtime.site_dir)!r})\n"
        "import numpy as np, onnxruntime as ort\n"
        "x = np.array(json.loads(sys.argv[1]), dtype=np.float32)\n"
        "out = []\n"
        "for path in sys.argv[2:]:\n"
        "    try:\n"
        "        out.append(ort.InferenceSession(path).run(None, {'x': x})[0].tolist())\n"
        "    except Exception as exc:\n"
        "        out.append(str(exc))\n"
        "print(json.dumps(out))\n")
    done = subprocess.run([sys.executable, "-S", "-E", str(script), json.dumps(x.tolist()), *map(str, graphs)],
                          capture_output=True, text=True, timeout=120, check=True)
    return json.loads(done.stdout)
