"""Showing and saving decoded inference outputs."""

from __future__ import annotations

import json
import pathlib

import numpy as np

from local_endpoint.client.payload import DecodedResponse
from local_endpoint.errors import InvokeError

OUTPUT_FILE_SUFFIXES = (".json", ".npz")


def format_response(response: DecodedResponse) -> str:
    """A task ensemble's answer as an application reads it (deployment_spec/sections/tasks.py); else one block per
    output: name, datatype, shape, then the values."""
    lines = [f"model: {response.model_name}"] if response.model_name else []
    answer = _answer(response)
    if answer is not None:
        return "\n".join(lines + answer)
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


def _answer(response: DecodedResponse) -> list[str] | None:
    """Lines per row for the outputs of a task's ensemble, then the options it was answered with (its ``options``
    output, the same on every row of a request), or None for any other model."""
    found = {output.name: output.array for output in response.outputs}
    options = found.pop("options", None)
    rows = _answer_rows(found)
    if rows is None or options is None:
        return rows
    applied = {json.dumps(json.loads(_printable(cell).ravel()[0]), sort_keys=True) for cell in options}
    return rows + [f"options: {', '.join(f'{k} {v}' for k, v in json.loads(one).items())}" for one in sorted(applied)]


def _answer_rows(found: dict[str, np.ndarray]) -> list[str] | None:
    if set(found) == {"labels", "scores"}:
        return [f"row {row}: " + ", ".join(f"{label} {score:.4f}" for label, score in
                                         zip(_printable(labels).ravel(), scores.ravel()))
                for row, (labels, scores) in enumerate(zip(found["labels"], found["scores"]))]
    vectors = next((name for name in ("sentence_embedding", "image_embedding") if set(found) == {name}), None)
    if vectors is not None:
        return [f"row {row}: {vectors}, {vector.size} values, norm {float(np.linalg.norm(vector)):.4f}: "
                + np.array2string(vector, threshold=12, precision=4, max_line_width=120)
                for row, vector in enumerate(found[vectors])]
    if set(found) == {"detections"}:
        return [f"row {row} detections: " + json.dumps(json.loads(_printable(cell).ravel()[0]))
                for row, cell in enumerate(found["detections"])]
    if set(found) == {"text"}:  # a transcript (automatic-speech-recognition)
        return [f"row {row} text: " + json.dumps(str(_printable(cell).ravel()[0]), ensure_ascii=False)
                for row, cell in enumerate(found["text"])]
    key = next((name for name in ("entities", "answers") if set(found) == {name}), None)
    if key is None:
        return None
    return [f"row {row} {key}: " + json.dumps(json.loads(_printable(cell).ravel()[0]), ensure_ascii=False)
            for row, cell in enumerate(found[key])]


def _printable(array: np.ndarray) -> np.ndarray:
    # BYTES outputs arrive as Python bytes; show them as text where they are text.
    if array.dtype == np.object_:
        return np.vectorize(lambda v: v.decode(errors="replace") if isinstance(v, bytes) else v, otypes=[object])(array)
    return array
