"""The CPU stand-ins (``--cpu-stand-in``): models whose backend the local Triton server lacks (ONNX Runtime,
PyTorch, DALI) rewritten to run on the CPU (``cpu_stand_in``) as the Python-backend model in ``stand_in_models/``,
whose files are copied into the Triton model repository.
"""
