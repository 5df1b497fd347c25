"""Showing and saving decoded inference outputs."""

from __future__ import annotations

import json
import pathlib

import numpy as np

from local_endpoint.errors import InvokeError
from local_endpoint.payload import DecodedResponse

OUTPUT_FILE_SUFFIXES = (".json", ".npz")


def format_response(response: DecodedResponse) -> str:
    """One block per output: name, datatype, shape, then the values."""
    lines = [f"model: {response.model_name}"] if response.model_name else []
    for output in response.outputs:
        lines.append(f"{output.name} {output.datatype} {list(output.array.shape)}")
        lines.append(np.array2string(_printable(output.array), threshold=200, max_line_width=120))
    return "\n".join(lines)


def save_response(response: DecodedResponse, path: pathlib.Path) -> None:
    """Write outputs as KServe-v2-like JSON (`.json`) or as named arrays (`.npz`)."""
    if path.suffix == ".json":
        document = {
            "model_name": response.model_name,
            "outputs": [
                {
                    "name": output.name,
                    "datatype": output.datatype,
                    "shape": list(output.array.shape),
                    "data": _printable(output.array).ravel().tolist(),
                }
                for output in response.outputs
            ],
        }
        path.write_text(json.dumps(document, indent=2) + "\n")
    elif path.suffix == ".npz":
        np.savez(path, **{output.name: output.array for output in response.outputs})
    else:
        raise InvokeError(
            f"output file {path} has suffix {path.suffix!r}; use one of {', '.join(OUTPUT_FILE_SUFFIXES)}"
        )


def _printable(array: np.ndarray) -> np.ndarray:
    # BYTES outputs arrive as Python bytes; show them as text where they are text.
    if array.dtype == np.object_:
        return np.vectorize(lambda v: v.decode(errors="replace") if isinstance(v, bytes) else v, otypes=[object])(array)
    return array
