"""``backend: onnxruntime``: export, candidate graphs, verification in the image's ONNX Runtime, int8 gate."""
