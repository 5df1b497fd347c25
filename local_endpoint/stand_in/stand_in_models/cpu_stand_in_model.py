"""CPU stand-in for an onnxruntime, pytorch or dali model, run by Triton's Python backend.

`local_endpoint.stand_in.cpu_stand_in` copies this file as `<version>/model.py` next to
the model's own file (model.onnx, model.pt, or model.dali with its CPU-placed
copy model.cpu.dali and the build's DALI runner) and keeps the model's name,
inputs, outputs and batching; the parameter `tritonsm_cpu_stand_in` says for
which backend it stands in. It is NOT that backend: the backend's tuning
parameters are ignored and latency is not representative.
"""
import json
import os
import sys

import numpy as np
import triton_python_backend_utils as pb_utils


class OnnxRuntimeRunner:
    """ONNX Runtime on the CPU; inputs and outputs by name, as the onnxruntime backend maps them."""

    def __init__(self, path, input_names, output_names, site=None, version=None, config=None):
        if site:
            # The image's ONNX Runtime release, installed by tritonsm in a side folder; this stub
            # process serves only this model, so putting it first on the path is contained.
            sys.path.insert(0, site)
        import onnxruntime

        if version and onnxruntime.__version__ != version:
            raise RuntimeError(
                f"the CPU stand-in needs ONNX Runtime {version} (the endpoint image's release) from {site}, "
                f"but imported {onnxruntime.__version__} from {os.path.dirname(onnxruntime.__file__)}; "
                "serve it again so tritonsm reinstalls the side environment")
        # In the server log, so a reader sees which runtime answered (the build's or the image's).
        print(f"tritonsm cpu stand-in: onnxruntime {onnxruntime.__version__} from "
              f"{os.path.dirname(onnxruntime.__file__)}", file=sys.stderr, flush=True)
        if os.path.isdir(path):  # Triton also accepts a model.onnx/ directory holding model.onnx + external data
            path = os.path.join(path, "model.onnx")
        self.session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
        self.output_names = output_names

    def run(self, feed):
        return self.session.run(self.output_names, feed)


class TorchScriptRunner:
    """torch.jit.load on the CPU; tensors `<name>__<index>` map to positions, as the pytorch backend maps them."""

    def __init__(self, path, input_names, output_names, site=None, version=None, config=None):
        import torch

        self.torch = torch
        self.module = torch.jit.load(path, map_location="cpu").eval()
        self.input_order = sorted(input_names, key=lambda name: _position(name, input_names))
        self.output_positions = [_position(name, output_names) for name in output_names]

    def run(self, feed):
        with self.torch.inference_mode():
            result = self.module(*(self.torch.from_numpy(feed[name]) for name in self.input_order))
        result = result if isinstance(result, (tuple, list)) else (result,)
        return [result[position].numpy() for position in self.output_positions]


class DaliRunner:
    """The model's serialized DALI pipeline on DALI's CPU operators, in the image's DALI release.

    Runs model.cpu.dali: model.dali with its GPU operators moved to the CPU (the build checked that
    this equals the same pipeline serialized for the CPU, and checked its output against PIL).
    Each request's zero-padded rows go to DALI as one batch, as the dali backend feeds them.
    """

    def __init__(self, path, input_names, output_names, site=None, version=None, config=None):
        sys.path.insert(0, os.path.dirname(path))  # dali_worker.py, beside this file
        if site:
            sys.path.insert(0, site)  # the image's DALI release; this stub process serves only this model
        import nvidia.dali
        from dali_worker import CpuPipeline

        if version and nvidia.dali.__version__ != version:
            raise RuntimeError(
                f"the CPU stand-in needs DALI {version} (the endpoint image's release) from {site}, but imported "
                f"{nvidia.dali.__version__}; serve it again so tritonsm reinstalls the side environment")
        threads = int(config.get("parameters", {}).get("num_threads", {}).get("string_value", "1"))
        with open(path, "rb") as fh:
            self.pipeline = CpuPipeline(fh.read(), max(config.get("max_batch_size", 1), 1), threads)
        print(f"tritonsm cpu stand-in: DALI {nvidia.dali.__version__} from {os.path.dirname(nvidia.dali.__file__)}, "
              f"CPU operators ({threads} threads) on {os.path.basename(path)}: the GPU operators of model.dali "
              "(nvJPEG decoding, GPU resize and normalisation) moved to the CPU; not representative of the "
              "endpoint's latency, and its nvJPEG pixels may differ by a level or two", file=sys.stderr, flush=True)
        self.input_names = input_names

    def run(self, feed):
        outputs = self.pipeline.run([feed[name] for name in self.input_names])
        return [np.stack(samples) for samples in outputs]


RUNNERS = {"onnxruntime": OnnxRuntimeRunner, "pytorch": TorchScriptRunner, "dali": DaliRunner}


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        parameters = {key: value["string_value"] for key, value in config.get("parameters", {}).items()}
        path = os.path.join(args["model_repository"], args["model_version"], parameters["tritonsm_stand_in_file"])
        self.input_names = [tensor["name"] for tensor in config["input"]]
        self.outputs = [(tensor["name"], pb_utils.triton_string_to_numpy(tensor["data_type"]))
                        for tensor in config["output"]]
        self.batched = config.get("max_batch_size", 0) > 0
        backend = parameters["tritonsm_cpu_stand_in"]
        # Where the image's runtime release is installed: tritonsm_<backend>_site / _version.
        self.runner = RUNNERS[backend](path, self.input_names, [name for name, _ in self.outputs],
                                       parameters.get(f"tritonsm_{backend}_site"),
                                       parameters.get(f"tritonsm_{backend}_version"), config)

    def execute(self, requests):
        feeds = [self._feed(request) for request in requests]
        if self.batched and len(feeds) > 1 and _stackable(feeds):
            # One run for the whole dynamic batch, as the real backends do.
            sizes = [len(next(iter(feed.values()))) for feed in feeds]
            merged = {name: np.concatenate([feed[name] for feed in feeds]) for name in feeds[0]}
            results = _split(self._run(merged), sizes)
        else:
            results = [self._run(feed) for feed in feeds]
        return [pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor(name, array)
                                                           for name, array in result.items()])
                for result in results]

    def finalize(self):
        self.runner = None

    def _feed(self, request):
        feed = {}
        for name in self.input_names:
            tensor = pb_utils.get_input_tensor_by_name(request, name)
            if tensor is not None:  # an optional input left out
                feed[name] = tensor.as_numpy()
        return feed

    def _run(self, feed):
        arrays = self.runner.run(feed)
        return {name: np.ascontiguousarray(array, dtype=dtype) for (name, dtype), array in zip(self.outputs, arrays)}


def _position(name, names):
    """The pytorch backend's naming convention `<name>__<index>`, else the config order."""
    prefix, separator, index = name.rpartition("__")
    return int(index) if separator and prefix and index.isdigit() else names.index(name)


def _stackable(feeds):
    """Same inputs with the same per-row shapes: rows can be concatenated along the batch axis."""
    first = {name: array.shape[1:] for name, array in feeds[0].items()}
    return all({name: array.shape[1:] for name, array in feed.items()} == first for feed in feeds)


def _split(result, sizes):
    bounds = np.cumsum(sizes)[:-1]
    pieces = {name: np.split(array, bounds) for name, array in result.items()}
    return [{name: pieces[name][index] for name in result} for index in range(len(sizes))]
