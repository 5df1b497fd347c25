"""Python-backend model files copied into a model directory by `local_endpoint.stand_in.cpu_stand_in`.

They run inside Triton's Python stub (they import `triton_python_backend_utils`),
never in this process: the package exists so the files ship with the project.
"""
