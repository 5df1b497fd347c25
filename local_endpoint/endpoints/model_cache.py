"""SageMaker's multi-model management, played against Triton's `/models` API.

On a real MME the platform, not Triton, decides what is loaded: on the first
request naming a target model it downloads and unpacks the tarball, calls
`POST /models {"model_name": <hash>, "url": <dir>}` on the container, then
`POST /models/<hash>/invoke`; under memory pressure it unloads the least
recently used models with `DELETE /models/<hash>`. Here a model count
(`capacity`) stands in for memory. Triton's answers are handled as SageMaker
handles them (https://docs.aws.amazon.com/sagemaker/latest/dg/multi-model-endpoints.html and Triton's src/sagemaker_server.cc): 409 on load = already loaded, 507 = out of
memory, so unload something and retry.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import json
import pathlib
import shutil
import threading

from local_endpoint.client.http_call import HttpReply, call
from local_endpoint.client.invoke import TARGET_MODEL_HEADER
from local_endpoint.errors import NoSpaceError, TarballError
from local_endpoint.server import archive, backends, disk_space, python_envs
from local_endpoint.stand_in import cpu_stand_in

JSON = "application/json"


@dataclasses.dataclass(frozen=True)
class CachedModel:
    target_model: str
    name_hash: str
    url: str


class LoadFailed(Exception):
    """Triton refused a model; `reply` is what the client gets."""

    def __init__(self, reply: HttpReply) -> None:
        super().__init__(reply.body.decode(errors="replace"))
        self.reply = reply


def error_reply(status: int, message: str) -> HttpReply:
    return HttpReply(status, JSON, json.dumps({"error": message}).encode())


class MultiModelCache:
    """Loads target models on first use and evicts the least recently used.

    Args:
        archives: Target model name (the tarball's file name, as in
            `TargetModel="resnet.tar.gz"`) to the tarball's path.
        triton_port: The SageMaker front end of the Triton server.
        unpack_root: Where tarballs are unpacked (the container's /opt/ml/models/).
        capacity: How many models may be loaded at once. None means no limit.
        cpu_stand_in: Replace onnxruntime and pytorch models by their CPU
            stand-ins when unpacking (see `cpu_stand_in`).
        runtime: The serving ONNX Runtime the ONNX stand-ins run.
        server_root: Where the server sees `unpack_root` (a container's /opt/ml/models); the
            load calls name paths under it. Defaults to `unpack_root` itself.
    """

    def __init__(
        self,
        archives: dict[str, pathlib.Path],
        triton_port: int,
        unpack_root: pathlib.Path,
        capacity: int | None,
        *,
        cpu_stand_in: bool = False,
        runtime: cpu_stand_in.StandInRuntime | None = None,
        env_swaps: dict[str, list[python_envs.EnvSwap]] | None = None,
        server_root: pathlib.PurePath | None = None,
    ) -> None:
        self.archives = dict(archives)
        self.server_root = server_root or unpack_root
        self.env_swaps = dict(env_swaps or {})
        self.triton_port = triton_port
        self.unpack_root = unpack_root
        self.capacity = capacity
        self.cpu_stand_in = cpu_stand_in
        self.runtime = runtime
        self._loaded: collections.OrderedDict[str, CachedModel] = collections.OrderedDict()
        self._in_flight: collections.Counter[str] = collections.Counter()
        self._state = threading.Condition()
        # One load or unload at a time, as SageMaker's agent does per instance.
        self._management = threading.Lock()
        # Every load and unload, oldest first: what a user watching the endpoint (or a test) asks about.
        self.events: list[tuple[str, str]] = []

    def loaded_models(self) -> list[str]:
        """Loaded target models, least recently used first."""
        with self._state:
            return list(self._loaded)

    def forget_loaded(self) -> None:
        """The server was replaced and has nothing loaded: each model loads again on its next request (unpacked
        already). Under the management lock, so no load is half done."""
        with self._management, self._state:
            self._loaded.clear()
            self.events.append(("server restarted", ""))

    def invoke(self, target_model: str, body: bytes, content_type: str) -> HttpReply:
        """Load `target_model` if needed, then run one inference on it."""
        if target_model not in self.archives:
            return error_reply(
                404,
                f"target model {target_model!r} is not one of this endpoint's models "
                f"({', '.join(sorted(self.archives))}); pass one of those names as the target model",
            )
        try:
            model = self._acquire(target_model)
        except LoadFailed as failure:
            return failure.reply
        except TarballError as error:
            return error_reply(400, str(error))
        except NoSpaceError as error:
            return error_reply(507, str(error))  # as SageMaker's Triton front end answers a full disk
        try:
            headers = {TARGET_MODEL_HEADER: target_model}
            if content_type:
                headers["Content-Type"] = content_type
            return call("127.0.0.1", self.triton_port, "POST", f"/models/{model.name_hash}/invoke",
                        body=body, headers=headers)
        finally:
            with self._state:
                self._in_flight[target_model] -= 1
                self._state.notify_all()

    def _acquire(self, target_model: str) -> CachedModel:
        """The loaded model, counted as in flight; loads it (and evicts) if needed."""
        if (model := self._take_if_loaded(target_model)) is not None:
            return model
        with self._management:
            if (model := self._take_if_loaded(target_model)) is not None:
                return model  # another request loaded it while we waited
            model = self._prepare(target_model)
            self._make_room()
            self._load_evicting_on_oom(model)
            with self._state:
                self._loaded[target_model] = model
                self._in_flight[target_model] += 1
            return model

    def _take_if_loaded(self, target_model: str) -> CachedModel | None:
        with self._state:
            model = self._loaded.get(target_model)
            if model is not None:
                self._loaded.move_to_end(target_model)
                self._in_flight[target_model] += 1
            return model

    def _prepare(self, target_model: str) -> CachedModel:
        """Unpack the tarball once, where SageMaker would put it."""
        name_hash = hashlib.sha256(target_model.encode()).hexdigest()[:32]
        model_dir = self.unpack_root / name_hash / "model"
        tarball = self.archives[target_model]
        listing = backends.list_archive_models(tarball)
        if not model_dir.exists():
            with disk_space.told_when_full(f"unpack target model {target_model!r} ({tarball})", model_dir):
                try:
                    archive.extract_tarball(tarball, model_dir)
                    python_envs.apply(self.env_swaps.get(target_model, []), model_dir)
                    if self.cpu_stand_in:
                        needed = backends.models_to_load(listing, tarball, backends.mme_root_model(listing))
                        cpu_stand_in.replace_with_stand_ins(model_dir, needed, tarball, self.runtime)
                        if not backends.machine_has_gpu():
                            cpu_stand_in.move_gpu_groups_to_cpu(model_dir, backends.gpu_group_models(needed, listing))
                except BaseException:
                    shutil.rmtree(model_dir, ignore_errors=True)  # the next request unpacks afresh
                    raise
        # SageMaker passes /opt/ml/models/<hash>/model in both layouts; the
        # front end accepts a bare config.pbtxt there only under that exact
        # path, so for the bare layout we pass the parent, whose single
        # subdirectory "model" Triton then loads the same way.
        bare = backends.TOP_LEVEL in listing
        url = model_dir.parent if bare else model_dir
        return CachedModel(target_model, name_hash, str(self.server_root / url.relative_to(self.unpack_root)))

    def _make_room(self) -> None:
        while self.capacity is not None and len(self._loaded) >= self.capacity:
            if not self._evict_one(wait=True):
                return

    def _evict_one(self, *, wait: bool) -> bool:
        """Unload the least recently used idle model; False if there is none."""
        with self._state:
            while True:
                victim = next((m for m in self._loaded.values() if self._in_flight[m.target_model] == 0), None)
                if victim is not None or not wait or not self._loaded:
                    break
                self._state.wait()
            if victim is None:
                return False
            del self._loaded[victim.target_model]
        self._unload(victim)
        return True

    def _load_evicting_on_oom(self, model: CachedModel) -> None:
        while True:
            reply = call(
                "127.0.0.1", self.triton_port, "POST", "/models",
                body=json.dumps({"model_name": model.name_hash, "url": model.url}).encode(),
                headers={TARGET_MODEL_HEADER: model.target_model, "Content-Type": JSON},
            )
            if reply.status in (200, 409):  # 409: already registered, i.e. loaded
                self.events.append(("load", model.target_model))
                return
            if reply.status == 507 and self._evict_one(wait=False):
                continue
            message = _error_text(reply)
            raise LoadFailed(error_reply(
                reply.status if reply.status in (400, 507) else 500,
                f"loading target model {model.target_model!r} ({self.archives[model.target_model]}) "
                f"failed with HTTP {reply.status}: {message}",
            ))

    def _unload(self, model: CachedModel) -> None:
        call("127.0.0.1", self.triton_port, "DELETE", f"/models/{model.name_hash}",
             headers={TARGET_MODEL_HEADER: model.target_model}, timeout=360)
        self.events.append(("unload", model.target_model))


def _error_text(reply: HttpReply) -> str:
    try:
        return json.loads(reply.body)["error"]
    except (ValueError, KeyError, TypeError):
        return reply.body.decode(errors="replace") or "(no message)"
