"""What the T5 example's execution environment costs: size, build time, determinism, first request.

    .venv/bin/python benchmarks/python_env_cost.py [--out benchmarks]

Builds the environment of `examples/t5-python-mme.yaml` (torch, transformers, tokenizers, numpy for
the Triton 25.09 image: CPython 3.12, manylinux x86_64) twice, each in an empty environment cache
that shares only the downloaded wheels (download time depends on the network, so it is left out and
the wheels are fetched first), and compares the two archives' sha256. Then `tritonsm build` of the
example with the first cache (the model and its tarball), an unchanged rebuild (median of 3), and
the local endpoint's first request to the T5 MME (which rebuilds the environment for this machine's
Python, unpacks the 3 GB tarball and loads the model). Writes python_env.json (raw) and
python_env.md; every timing carries the 1-minute load average at its end.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SPEC = ROOT / "examples" / "t5-python-mme.yaml"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=pathlib.Path, default=ROOT / "benchmarks")
    parser.add_argument("--wheels", type=pathlib.Path, default=pathlib.Path.home() / ".cache/tritonsm/python-envs/wheels",
                        help="the shared wheel download folder (filled first if empty)")
    args = parser.parse_args()
    from deployment_spec import load_spec
    from model_build.python_env import environment, target
    from model_build.recipes.python_recipes import T5_REQUIREMENTS

    lines, aim = list(T5_REQUIREMENTS), target.for_image(load_spec(SPEC).triton_version)
    record: dict = {"spec": SPEC.name, "requirements": lines, "target": aim.label, "cpus": os.cpu_count()}
    with tempfile.TemporaryDirectory(prefix="tritonsm-envcost-") as tmp:
        root = pathlib.Path(tmp)
        caches = [_cache(root / name, args.wheels) for name in ("a", "b")]
        print("fetching the wheels (not timed) ...", flush=True)
        environment.build(lines, aim, _cache(root / "warm", args.wheels), lambda line: None, "warm-up")
        builds = []
        for cache in caches:
            print(f"building the environment in {cache} ...", flush=True)
            start = time.monotonic()
            built = environment.build(lines, aim, cache, lambda line: None, "t5")
            builds.append({"seconds": round(time.monotonic() - start, 1), "load": _load(),
                           "sha256": _sha256(built.archive)})
        record.update(environment_builds=builds, identical=builds[0]["sha256"] == builds[1]["sha256"],
                      packages=len(built.packages), archive_bytes=built.archive_bytes,
                      unpacked_bytes=built.unpacked_bytes)
        env = {**os.environ, "TRITONSM_CACHE_DIR": str(caches[0])}
        build = [sys.executable, "-m", "tritonsm", "build", "--spec", str(SPEC), "--out", f"{tmp}/assets",
                 "--work-dir", f"{tmp}/work"]
        print("tritonsm build of the example (environment from the cache) ...", flush=True)
        record["model_build"] = _timed(build, env)
        manifest = json.loads((root / "assets" / "manifest.json").read_text())
        (artifact,) = manifest["endpoints"]["t5-mme"]["artifacts"]
        record["tarball_bytes"] = artifact["size"]
        record["unchanged_rebuild_median_s"] = statistics.median(_timed(build, env)["seconds"] for _ in range(3))
        print("local endpoint: first request to the T5 MME ...", flush=True)
        record["local_first_request"] = _first_request(root, caches[0])
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "python_env.json").write_text(json.dumps(record, indent=2) + "\n")
    (args.out / "python_env.md").write_text(_markdown(record))
    print(_markdown(record))
    return 0


def _cache(folder: pathlib.Path, wheels: pathlib.Path) -> pathlib.Path:
    (folder / "python-envs").mkdir(parents=True)
    wheels.mkdir(parents=True, exist_ok=True)
    (folder / "python-envs" / "wheels").symlink_to(wheels)
    return folder


def _timed(command: list[str], env: dict) -> dict:
    start = time.monotonic()
    subprocess.run(command, cwd=ROOT, env=env, check=True, capture_output=True, text=True)
    return {"seconds": round(time.monotonic() - start, 2), "load": _load()}


def _first_request(root: pathlib.Path, cache: pathlib.Path) -> dict:
    os.environ["TRITONSM_CACHE_DIR"] = str(cache)
    from deployment_spec.served import resolve_endpoint
    from local_endpoint.client.invoke import invoke_url
    from local_endpoint.client.payload import NamedTensor, encode_request
    from local_endpoint.endpoints.multi_model import MultiModelEndpoint
    import numpy as np

    local = resolve_endpoint(SPEC, "t5-mme", None, root / "assets" / "manifest.json")
    start = time.monotonic()
    with MultiModelEndpoint(list(local.tarballs), env=local.env, cpu_stand_in=True,
                            triton_version=local.triton_version) as server:
        started = time.monotonic() - start
        text = np.array([[b"translate English to German: the house is wonderful"]], dtype=np.object_)
        request = encode_request([NamedTensor("TEXT", "BYTES", text)], binary=False)
        start = time.monotonic()
        invoke_url(server.url, request, target_model=local.tarballs[0].name)
        first = time.monotonic() - start
        log = server.log_path.read_text()
    return {"start_s": round(started, 1), "first_request_s": round(first, 1), "load": _load(),
            "ran_in_environment": "Using Python execution env " in log}


def _sha256(path: pathlib.Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _load() -> float:
    return round(os.getloadavg()[0], 2)


def _markdown(r: dict) -> str:
    builds = "; ".join(f"{b['seconds']} s (load {b['load']})" for b in r["environment_builds"])
    return f"""# Execution environment of {r['spec']} ({r['target']}, {r['cpus']} CPUs)

| what | measured |
|---|---|
| requirements | {', '.join(r['requirements'])} |
| wheels in the environment | {r['packages']} |
| archive / unpacked | {r['archive_bytes'] / 1e9:.2f} GB / {r['unpacked_bytes'] / 1e9:.2f} GB |
| MME model tarball (environment + model) | {r['tarball_bytes'] / 1e9:.2f} GB |
| environment build from downloaded wheels (resolve, unpack, pack), two empty caches | {builds} |
| the two archives byte-identical | {r['identical']} |
| `tritonsm build` of the example, environment cached | {r['model_build']['seconds']} s (load {r['model_build']['load']}) |
| unchanged rebuild, median of 3 | {r['unchanged_rebuild_median_s']} s |
| local endpoint start (rebuilds the environment for this machine's Python) | {r['local_first_request']['start_s']} s |
| its first T5 request (unpack the tarball, unpack the environment, load) | {r['local_first_request']['first_request_s']} s (load {r['local_first_request']['load']}) |
| the model ran inside the environment (server log) | {r['local_first_request']['ran_in_environment']} |
"""


if __name__ == "__main__":
    sys.exit(main())
