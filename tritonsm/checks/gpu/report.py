"""What `tritonsm verify --gpu` ran, what it could not run and why: one record per check, text and JSON."""
from __future__ import annotations

import dataclasses
import json
import pathlib
from typing import Any

PASSED, FAILED, NOT_RUN = "passed", "failed", "not run"
EXIT_OK, EXIT_FAILED, EXIT_NO_CUDA = 0, 1, 3


@dataclasses.dataclass(frozen=True)
class Check:
    model: str
    backend: str
    artifact: str                 # the tarball's file name
    what: str                     # e.g. "TorchScript on cuda:0 vs the CPU"
    status: str                   # PASSED, FAILED or NOT_RUN
    detail: str                   # the measurement, the error, or why it did not run
    facts: dict[str, Any] = dataclasses.field(default_factory=dict)

    def line(self) -> str:
        return f"  {self.status.upper():8} {self.model} ({self.backend}, {self.artifact}): {self.what}: {self.detail}"


@dataclasses.dataclass
class Report:
    release: str
    host: dict[str, Any]
    cuda: bool
    no_cuda_reason: str = ""
    checks: list[Check] = dataclasses.field(default_factory=list)

    def counts(self) -> dict[str, int]:
        return {status: sum(c.status == status for c in self.checks) for status in (PASSED, FAILED, NOT_RUN)}

    def exit_code(self) -> int:
        if not self.cuda:
            return EXIT_NO_CUDA
        return EXIT_FAILED if self.counts()[FAILED] else EXIT_OK

    def text(self, json_path: pathlib.Path | None = None) -> str:
        host = ", ".join(f"{k} {v}" for k, v in self.host.items() if v not in (None, "", []))
        lines = [f"tritonsm verify --gpu: the artifacts of Triton {self.release}", f"host: {host}"]
        if not self.cuda:
            lines.append(f"NO CUDA DEVICE HERE: {self.no_cuda_reason}; nothing could run on a GPU")
        lines += [c.line() for c in self.checks]
        counts = self.counts()
        lines.append(f"{counts[PASSED]} passed, {counts[FAILED]} failed, {counts[NOT_RUN]} not run"
                     + (f"; report: {json_path}" if json_path else ""))
        if not self.cuda:
            lines.append(f"exit {EXIT_NO_CUDA}: no CUDA device; run `tritonsm verify --gpu` on a host with an NVIDIA GPU, "
                         "its driver and a CUDA build of torch (PyPI's Linux torch wheels are one)")
        return "\n".join(lines)

    def to_json(self) -> str:
        body = {"schema": 1, "release": self.release, "host": self.host, "cuda": self.cuda,
                "no_cuda_reason": self.no_cuda_reason or None, "counts": self.counts(), "exit_code": self.exit_code(),
                "checks": [dataclasses.asdict(c) for c in self.checks]}
        return json.dumps(body, indent=1, sort_keys=True) + "\n"
