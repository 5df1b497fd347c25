"""TensorRT plans: trtexec in nvcr.io/nvidia/tensorrt:<YY.MM>-py3, YY.MM = the Triton image tag (FACTS §6)."""
