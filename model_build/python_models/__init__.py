"""Source files copied into Python-backend model directories as ``<version>/model.py``.

They run inside Triton's Python backend (``triton_python_backend_utils`` is provided there),
never inside model_build.
"""
