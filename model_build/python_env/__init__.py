"""Execution environments for Python-backend models, built from pinned wheels without conda.

What Triton's Python backend needs of an ``EXECUTION_ENV_PATH`` archive (python_backend
src/stub_launcher.cc and src/pb_env.cc, r23.12 to r26.07): a gzipped tar that it unpacks into
``/tmp/python_env_*/N``; a ``bin/activate`` file there (checked to exist; sourced by bash up to
r25.07, from r25.08 the stub launcher sets the same variables itself: VIRTUAL_ENV, PATH with
``bin`` first, LD_LIBRARY_PATH with ``lib`` first, no PYTHONHOME). The stub embeds libpython, whose
start-up looks ``python3`` up on PATH and, finding a ``pyvenv.cfg`` beside it, takes the folder as
``sys.prefix`` and its ``lib/pythonX.Y/site-packages`` (CPython Modules/getpath.py, Lib/site.py).
So a virtual-environment layout whose ``bin/python3`` points at the image's own interpreter is
enough: the standard library and libpython stay the image's, the packages are ours.
"""
