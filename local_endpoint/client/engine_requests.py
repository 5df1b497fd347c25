"""Our generate request (``{"text_input", "parameters": {max_new_tokens, temperature, top_p, top_k,
repetition_penalty, stop, seed, do_sample}}``) in the form each GPU engine takes through Triton's generate route,
whose top-level keys become input tensors and whose ``parameters`` become request parameters.

Why the clients map, not a Python-backend front: a front model would carry every streamed piece through a second
Python stub (BLS) and hide the engines' own tensors and metrics, to spare clients a dozen lines kept here.

- vLLM (vllm_backend src/model.py, utils/request.py at 8de0c14): ``stream`` and ``exclude_input_in_output``
  tensors; without a ``sampling_parameters`` tensor it reads the request parameters as vLLM's ``SamplingParams``
  (``max_tokens``; greedy is ``temperature: 0``); an unknown key fails the request.
- TensorRT-LLM's LLM-API model (triton_backend/all_models/llmapi/tensorrt_llm/config.pbtxt): ``streaming`` and one
  ``sampling_param_<name>`` tensor each; it has no repetition penalty input.
"""
from __future__ import annotations

from typing import Any, Mapping

VLLM, TENSORRT_LLM = "vllm", "tensorrt-llm"
_SHARED = ("temperature", "top_p", "top_k", "stop", "seed")


def engine_request(engine: str, prompt: str, parameters: Mapping[str, Any], *, stream: bool) -> dict[str, Any]:
    """The request body for ``engine``; raises ValueError for a parameter it cannot take."""
    wanted = dict(parameters)
    greedy = not wanted.pop("do_sample", False)
    sampling = {key: wanted.pop(key) for key in _SHARED if key in wanted}
    if "max_new_tokens" in wanted:
        sampling["max_tokens"] = wanted.pop("max_new_tokens")
    if greedy:  # both engines decode greedily at temperature 0 (vLLM: SamplingParams; LLM-API: top_k 1 as well)
        sampling.update(temperature=0.0, top_k=1) if engine == TENSORRT_LLM else sampling.update(temperature=0.0)
    if engine == VLLM:
        if "repetition_penalty" in wanted:
            sampling["repetition_penalty"] = wanted.pop("repetition_penalty")
        body: dict[str, Any] = {"text_input": prompt, "stream": stream, "exclude_input_in_output": True,
                                "parameters": sampling}
    elif engine == TENSORRT_LLM:
        body = {"text_input": prompt, "streaming": stream, "sampling_param_exclude_input_from_output": True,
                **{f"sampling_param_{key}": value for key, value in sampling.items()}}
    else:
        raise ValueError(f"engine {engine!r}: allowed {VLLM}, {TENSORRT_LLM}")
    if wanted:
        raise ValueError(f"{engine} takes no {', '.join(sorted(wanted))} (parameters of our generate request it "
                         "has no input for)")
    return body
