"""Benchmarks behind `tritonsm bench`: runtime comparison, local load tests, Inference Recommender requests.

Heavy libraries (torch, onnxruntime, matplotlib, botocore) load inside the functions that use them.
The standalone scripts here (load_local.py, synth_time.py, build_memory.py) run on their own.
"""
