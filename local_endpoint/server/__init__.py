"""The Triton server process and what it needs: the nvidia-pytriton install (``triton_install``), the command line
and environment the SageMaker Triton container would use (``serve_flags``), starting, watching and stopping the
process (``launch``, ``server_process``, ``ports``, ``stop_signals``), its Prometheus metrics (``triton_metrics``),
and the model repository it serves: tarballs unpacked as SageMaker unpacks them (``archive``, ``disk_space``,
``work_dirs``), their backends checked (``backends``, ``stand_in_kinds``) and their Python environments rebuilt
for the local server's Python (``python_envs``).
"""
