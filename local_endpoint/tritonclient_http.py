"""tritonclient's HTTP request/response codecs, without its HTTP client.

`tritonclient.http` encodes KServe v2 requests (JSON and binary+json) and
decodes responses; it is the reference for the format. Its package import
also builds the synchronous client, which needs gevent (the `tritonclient[http]`
extra); the project installs `tritonclient[grpc]` only. The codec modules
themselves need just numpy, python-rapidjson and `tritonclient.utils`, so when
the package import fails we load those modules from their files under private
names. Nothing is copied from tritonclient and its package is left untouched.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import pathlib
import types
from typing import Any, Callable

CODEC_MODULES = ("_infer_input", "_requested_output", "_infer_result", "_utils")


@dataclasses.dataclass(frozen=True)
class HttpCodec:
    InferInput: type
    InferRequestedOutput: type
    InferResult: type
    get_inference_request: Callable[..., tuple[bytes, int | None]]


def load_http_codec() -> HttpCodec:
    try:
        from tritonclient.http import InferInput, InferRequestedOutput, InferResult
        from tritonclient.http._utils import _get_inference_request

        return HttpCodec(InferInput, InferRequestedOutput, InferResult, _get_inference_request)
    except (ImportError, RuntimeError):
        pass
    modules = {name: _load_codec_module(name) for name in CODEC_MODULES}
    return HttpCodec(
        InferInput=modules["_infer_input"].InferInput,
        InferRequestedOutput=modules["_requested_output"].InferRequestedOutput,
        InferResult=modules["_infer_result"].InferResult,
        get_inference_request=modules["_utils"]._get_inference_request,
    )


def _load_codec_module(name: str) -> types.ModuleType:
    import tritonclient.utils  # the codecs import it by absolute name

    package_dir = pathlib.Path(tritonclient.utils.__file__).parent.parent / "http"
    spec = importlib.util.spec_from_file_location(f"local_endpoint._tritonclient_http{name}", package_dir / f"{name}.py")
    module: Any = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
