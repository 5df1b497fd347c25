"""What this host offers the GPU checks: a CUDA device for torch, and which runtimes' Python wheels are here."""
from __future__ import annotations

import importlib.util
import shutil
from typing import Any


def probe() -> tuple[bool, str, dict[str, Any]]:
    """(CUDA usable, why not, facts for the report)."""
    import torch

    facts: dict[str, Any] = {"torch": torch.__version__, "torch CUDA": torch.version.cuda,
                             "nvidia-smi": shutil.which("nvidia-smi")}
    cuda = torch.cuda.is_available()
    reason = ""
    if cuda:
        facts["device"] = f"cuda:0 {torch.cuda.get_device_name(0)} (compute capability " \
                          f"{'.'.join(map(str, torch.cuda.get_device_capability(0)))})"
        facts["devices"] = torch.cuda.device_count()
    elif torch.version.cuda is None:
        reason = f"torch {torch.__version__} is a CPU-only build (torch.version.cuda is None)"
    else:
        reason = f"torch {torch.__version__} (CUDA {torch.version.cuda}) sees no device (torch.cuda.is_available() is False)"
    if not cuda and facts["nvidia-smi"] is None:
        reason += " and there is no nvidia-smi (no NVIDIA driver)"
    facts["tensorrt"] = _version("tensorrt")
    facts["onnxruntime"] = _version("onnxruntime")
    if facts["onnxruntime"]:
        import onnxruntime
        facts["onnxruntime providers"] = onnxruntime.get_available_providers()
    return cuda, reason, facts


def _version(module: str) -> str | None:
    if importlib.util.find_spec(module) is None:
        return None
    return getattr(importlib.import_module(module), "__version__", "unknown")
