"""`tritonsm smoke ENDPOINT`: one request per model of an endpoint, checked against what the build recorded.

The build manifest records each Triton model's output tensors (name, datatype, dims). A smoke test
sends every model (each TargetModel of a multi-model endpoint, the default model of a single-model
one) a deterministic request made from its recorded inputs, and checks that each recorded output
comes back with its datatype and shape, with finite values. An input that takes encoded images (a
dali model's, or an ensemble's that feeds one) gets a real JPEG made on the spot
(model_build.backends.dali.check_images: 640x480, fixed seed, so a recording and a later run send the same
bytes). With ``--expected FILE`` (written by
``--record FILE`` against an endpoint that served the same build, e.g. `tritonsm serve`), the
values must also match within the model's ``tolerance`` (atol, rtol).

The same checks run against a local endpoint (``LocalClient``, an URL) and a deployed one
(``DeployedClient``, sagemaker-runtime InvokeEndpoint): one interface, ``invoke(request, target_model,
inference_component)``. An endpoint of inference components gets one case per component, named by its
``InferenceComponentName``.
"""
from __future__ import annotations

import dataclasses
import json
import pathlib
from typing import Any, Callable, Mapping, Optional, Protocol

import numpy as np

from deployment_spec.sections.dali import image_inputs
from deployment_spec.sections.endpoint import EndpointKind, EndpointSpec
from deployment_spec.parsing.errors import UserError
from deployment_spec.builds.manifest import EndpointArtifacts, Manifest, TensorSpec
from deployment_spec.sections.model import ModelSpec
from deployment_spec.sections.tasks import AUDIO, IMAGE
from local_endpoint.client.payload import DecodedResponse, EncodedRequest, NamedTensor, encode_request
from local_endpoint.errors import InvokeError

SAMPLE_TEXT = "a fine film"   # BYTES inputs (text models that tokenize inside)
SAMPLE_IMAGE = (640, 480)      # encoded-image inputs: a JPEG of this size
DEFAULT_SAMPLING_RATE = 16000  # an audio task's WAV where its checkpoint's rate is not at hand
NUMPY = {"TYPE_FP32": np.float32, "TYPE_FP16": np.float16, "TYPE_FP64": np.float64, "TYPE_INT64": np.int64,
         "TYPE_INT32": np.int32, "TYPE_INT8": np.int8, "TYPE_UINT8": np.uint8, "TYPE_BOOL": np.bool_}


class Client(Protocol):
    """Where the requests go: a local endpoint or a deployed SageMaker endpoint."""

    def invoke(self, request: EncodedRequest, target_model: Optional[str],
               inference_component: Optional[str] = None) -> DecodedResponse: ...


@dataclasses.dataclass(frozen=True)
class LocalClient:
    """The container contract (`POST /invocations`) of a local endpoint object; the CLI calls through
    ``DeployedClient`` with the local runtime's URL instead."""

    url: str

    def invoke(self, request: EncodedRequest, target_model: Optional[str],
               inference_component: Optional[str] = None) -> DecodedResponse:
        from local_endpoint.client.invoke import invoke_url
        return invoke_url(self.url, request, target_model=target_model, inference_component=inference_component)


@dataclasses.dataclass(frozen=True)
class DeployedClient:
    """InvokeEndpoint through boto3: the deployed endpoint, or the same name on the local SageMaker Runtime of
    `tritonsm serve` (``endpoint_url``)."""

    endpoint_name: str
    region: Optional[str] = None
    client: Any = None   # a sagemaker-runtime client (tests pass one wrapped in botocore's Stubber)
    endpoint_url: Optional[str] = None

    def invoke(self, request: EncodedRequest, target_model: Optional[str],
               inference_component: Optional[str] = None) -> DecodedResponse:
        from local_endpoint.client.invoke import invoke_sagemaker_endpoint
        return invoke_sagemaker_endpoint(self.endpoint_name, request, region=self.region,
                                         target_model=target_model, inference_component=inference_component,
                                         client=self.client, endpoint_url=self.endpoint_url)


@dataclasses.dataclass(frozen=True)
class AsyncClient:
    """InvokeEndpointAsync through boto3 (an asynchronous endpoint takes no InvokeEndpoint): the body under its
    input location, the answer read back from S3; deployed, or local with the URLs `tritonsm serve` prints."""

    endpoint_name: str
    input_url: str          # s3://bucket/async/<endpoint>/input/
    runtime: Any            # a sagemaker-runtime client
    s3: Any                 # an s3 client

    def invoke(self, request: EncodedRequest, target_model: Optional[str],
               inference_component: Optional[str] = None) -> DecodedResponse:
        from local_endpoint.client.invoke_async import invoke_async_endpoint
        return invoke_async_endpoint(self.endpoint_name, request, input_url=self.input_url, runtime=self.runtime,
                                     s3=self.s3)


@dataclasses.dataclass(frozen=True)
class SmokeCase:
    model: str                       # the Triton model answering
    target_model: Optional[str]      # multi-model: the tarball (TargetModel)
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    batched: bool                    # max_batch_size > 0: dims exclude the batch dimension
    sequence_length: Optional[int]
    atol: float
    rtol: float
    samples: Optional[pathlib.Path] = None   # the spec's samples (.npz): the request is their first row
    image_inputs: frozenset[str] = frozenset()   # inputs taking encoded image bytes (UINT8 [-1])
    inference_component: Optional[str] = None  # inference components: the component (InferenceComponentName)
    file_input: Optional[str] = None  # an image or audio task's IMAGE / AUDIO: one encoded file per BYTES row
    sampling_rate: int = DEFAULT_SAMPLING_RATE  # an audio task's: the WAV it is sent

    def tensors(self) -> list[NamedTensor]:
        """Batch 1, deterministic: the first row of the model's samples, else ones for integer inputs
        (valid token ids and masks), 0.5 for floats and a JPEG for encoded-image inputs."""
        if self.samples is not None:
            return self._first_sample()
        out = []
        for spec in self.inputs:
            if spec.name == self.file_input:
                data = self._file()
                out.append(NamedTensor(spec.name, "BYTES", np.array([[data]] if self.batched else [data],
                                                                    dtype=np.object_)))
                continue
            if spec.name in self.image_inputs:
                from model_build.backends.dali.check_images import jpeg
                encoded = np.frombuffer(jpeg(*SAMPLE_IMAGE), dtype=np.uint8)
                out.append(NamedTensor(spec.name, "UINT8", encoded[None, :] if self.batched else encoded))
                continue
            dims = [d if d >= 0 else (self.sequence_length or 1) for d in spec.served_dims(self.batched)]
            shape = ([1] if self.batched else []) + dims
            datatype = spec.data_type.removeprefix("TYPE_")
            if spec.data_type in ("TYPE_STRING", "TYPE_BYTES"):
                array = np.full(shape, SAMPLE_TEXT.encode(), dtype=np.object_)
                datatype = "BYTES"
            elif spec.data_type not in NUMPY:
                raise UserError(f"model {self.model}: input {spec.name} has datatype {spec.data_type}, which the smoke "
                                f"test cannot make up; supported: {', '.join(NUMPY)}, TYPE_STRING")
            else:
                kind = np.dtype(NUMPY[spec.data_type]).kind
                array = np.full(shape, 0.5 if kind == "f" else 1, dtype=NUMPY[spec.data_type])
            out.append(NamedTensor(spec.name, datatype, array))
        return out

    def _file(self) -> bytes:
        """A JPEG for IMAGE, a second of a 440 Hz tone as 16-bit WAV at the model's rate for AUDIO."""
        if self.file_input == IMAGE:
            from model_build.backends.dali.check_images import jpeg
            return jpeg(*SAMPLE_IMAGE)
        from model_build.backends.ensemble.audio_samples import pcm_wav
        seconds = np.arange(self.sampling_rate) / self.sampling_rate
        return pcm_wav(0.3 * np.sin(2 * np.pi * 440 * seconds), self.sampling_rate)

    def _first_sample(self) -> list[NamedTensor]:
        try:
            with np.load(self.samples, allow_pickle=False) as data:
                return [NamedTensor(spec.name, spec.data_type.removeprefix("TYPE_"), data[spec.name][:1])
                        for spec in self.inputs]
        except (OSError, KeyError, ValueError) as exc:
            raise UserError(f"model {self.model}: cannot read its smoke request from the samples {self.samples} "
                            f"({type(exc).__name__}: {exc}); restore the file the build used, or remove samples") from None


def cases(endpoint: EndpointSpec, built: EndpointArtifacts, manifest: Manifest,
          models: Mapping[str, ModelSpec], root: Optional[pathlib.Path] = None,
          component_names: Optional[Mapping[str, str]] = None) -> list[SmokeCase]:
    """One case per model a caller can reach: each MME TargetModel, each inference component (its archive's
    first model; ``component_names`` maps it to the component's name), or the SME's default model
    (``root``: the spec's folder, where the models' samples files are)."""
    out = []
    for artifact in built.artifacts:
        component = None
        if endpoint.kind is EndpointKind.INFERENCE_COMPONENTS:
            name, target = artifact.models[0], None
            component = (component_names or {}).get(name)
            if component is None:
                raise UserError(f"endpoint {endpoint.name}: no inference component name for model {name}")
        elif endpoint.kind is EndpointKind.MULTI_MODEL:
            stem = artifact.object_name.removesuffix(".tar.gz").rsplit("-", 1)[0]
            name, target = (stem if stem in artifact.models else artifact.models[0]), artifact.object_name
        else:
            name, target = built.default_model or artifact.models[0], None
        entry = manifest.models[name]
        spec = models.get(entry.spec_model)
        tolerance = spec.tolerance if spec else None
        samples = root / spec.samples if spec and spec.samples and root is not None else None
        task = spec.task if spec else None
        # A DALI first step takes IMAGE as UINT8 rows (image_inputs below), not one file per BYTES row.
        file_input = (IMAGE if task and task.takes_image() and not task.dali_preprocess() else
                      AUDIO if task and task.takes_audio() else None)
        out.append(SmokeCase(name, target, entry.inputs, entry.outputs, entry.max_batch_size > 0,
                             spec.sequence_length if spec else None,
                             tolerance.atol if tolerance else 1e-3, tolerance.rtol if tolerance else 1e-3, samples,
                             image_inputs(models, entry.spec_model), component, file_input,
                             _sampling_rate(spec, root) if file_input == AUDIO else DEFAULT_SAMPLING_RATE))
    return out


def _sampling_rate(spec: Optional[ModelSpec], root: Optional[pathlib.Path]) -> int:
    """An audio task's rate, from its checkpoint's preprocessor_config.json where the spec's folder is at hand."""
    import json

    if spec is None or spec.weights is None or root is None:
        return DEFAULT_SAMPLING_RATE
    try:
        found = json.loads((root / spec.weights / "preprocessor_config.json").read_text()).get("sampling_rate")
    except (OSError, ValueError):
        return DEFAULT_SAMPLING_RATE
    return found if isinstance(found, int) else DEFAULT_SAMPLING_RATE


@dataclasses.dataclass
class CaseResult:
    case: SmokeCase
    problems: list[str]
    outputs: dict[str, list] = dataclasses.field(default_factory=dict)   # for --record
    compared: bool = False                                               # values checked against a recording


def run(client: Client, smoke_cases: list[SmokeCase], expected: Optional[Mapping[str, Any]] = None,
        log: Callable[[str], None] = print) -> list[CaseResult]:
    """Invokes each case once; a refused request is a problem of that case, not an abort."""
    results = []
    for case in smoke_cases:
        request = encode_request(case.tensors(), binary=True)
        try:
            response = client.invoke(request, case.target_model, case.inference_component)
        except InvokeError as exc:
            results.append(CaseResult(case, [f"model {case.model}: {exc}"]))
            log(f"  {case.model}: FAILED ({exc})")
            continue
        result = check(case, response, (expected or {}).get(case.model))
        results.append(result)
        what = "values match the recording" if result.compared else "outputs as recorded by the build"
        log(f"  {case.model}: " + ("ok, " + what if not result.problems else "FAILED: " + "; ".join(result.problems)))
    return results


def check(case: SmokeCase, response: DecodedResponse, expected: Optional[Mapping[str, Any]] = None) -> CaseResult:
    """Every recorded output present, with its datatype, shape and finite values (and the recording's values)."""
    got = {t.name: t for t in response.outputs}
    problems, values = [], {}
    for spec in case.outputs:
        tensor = got.get(spec.name)
        if tensor is None:
            problems.append(f"model {case.model}: output {spec.name} is missing (got {', '.join(got) or 'none'})")
            continue
        datatype = spec.data_type.removeprefix("TYPE_").replace("STRING", "BYTES")
        if tensor.datatype != datatype:
            problems.append(f"model {case.model}: output {spec.name} is {tensor.datatype}, the build recorded {datatype}")
        shape = list(tensor.array.shape)
        want = ([1] if case.batched else []) + list(spec.served_dims(case.batched))
        if len(shape) != len(want) or any(w >= 0 and w != s for w, s in zip(want, shape)):
            problems.append(f"model {case.model}: output {spec.name} has shape {shape}, the build recorded {want} "
                            "(-1: any size)")
        if tensor.array.dtype.kind in "fc" and not np.all(np.isfinite(tensor.array)):
            problems.append(f"model {case.model}: output {spec.name} holds NaN or infinite values")
        if tensor.array.dtype.kind in "biuf":
            values[spec.name] = tensor.array.tolist()
    compared = False
    if expected is not None:
        compared = True
        for name, recorded in expected.items():
            if name in values and np.shape(recorded) == np.shape(values[name]) and not np.allclose(
                    np.asarray(values[name], dtype=np.float64), np.asarray(recorded, dtype=np.float64),
                    atol=case.atol, rtol=case.rtol):
                diff = float(np.max(np.abs(np.asarray(values[name], float) - np.asarray(recorded, float))))
                problems.append(f"model {case.model}: output {name} differs from the recording by up to {diff:.3g} "
                                f"(tolerance atol {case.atol:g}, rtol {case.rtol:g})")
    return CaseResult(case, problems, values, compared)


def save_recording(results: list[CaseResult], path: pathlib.Path) -> None:
    """Outputs per model, the ``--expected`` file of a later smoke test (only results without problems)."""
    body = {"schema": 1, "models": {r.case.model: r.outputs for r in results if not r.problems}}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(body, indent=1, sort_keys=True) + "\n")


def load_recording(path: pathlib.Path) -> dict[str, Any]:
    try:
        body = json.loads(path.read_text())
        return dict(body["models"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UserError(f"--expected {path}: not a smoke recording ({exc}); write one with "
                        "`tritonsm smoke ENDPOINT --url URL --record FILE`") from None
