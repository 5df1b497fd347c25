"""torch -> ONNX: the export, its weights beside the graph, a recipe's export; shared by onnxruntime and tensorrt."""
