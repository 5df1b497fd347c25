"""One package per Triton backend, each with a ``build.py`` whose ``build`` returns a ``BackendResult``.

onnxruntime/, tensorrt/, pytorch/, python/, dali/, ensemble/: everything that backend needs (export
or copy, optimisation, verification in the serving runtime, its files, its config fields). The
dispatcher (model_build/dispatch.py) picks one from a table; no backend imports another
(tests/model_build/test_backend_imports.py). Map: model_build/README.md.
"""
