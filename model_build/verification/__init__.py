"""Verification: a model's file run in the runtime release that will serve it, against a reference.

The serving cases (cases.py), the runtime release installed into a hashed side environment
(side_env.py, run by worker.py), the verdict (verify.py), a user's file against the same file in
this machine's runtime (file_check.py), the manifest's typed record (record.py). Each backend
drives it for its own file kind (model_build/backends/<backend>/).
"""
