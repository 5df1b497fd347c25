"""TensorRT plans: trtexec in nvcr.io/nvidia/tensorrt:<YY.MM>-py3, YY.MM = the Triton image tag (TensorRT's trtexec documentation and the nvcr.io/nvidia/tensorrt release notes)."""
