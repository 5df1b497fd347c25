"""Input tensors from what a user has at hand: a JSON or NumPy file, text, or image files."""

from __future__ import annotations

import json
import pathlib

import numpy as np

from local_endpoint.client.payload import NamedTensor
from local_endpoint.errors import InvokeError

# KServe v2 datatypes Triton accepts over HTTP (BF16 travels only as binary).
DATATYPES = (
    "BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64",
    "FP16", "FP32", "FP64", "BYTES", "BF16",
)
INPUT_FILE_SUFFIXES = (".json", ".npy", ".npz")


def read_input_file(path: pathlib.Path, input_name: str | None = None) -> list[NamedTensor]:
    """Tensors from a file.

    - `.json`: a KServe v2 request, `{"inputs": [{"name", "shape", "datatype", "data"}]}`.
    - `.npy`: one array, sent as `input_name` with the datatype of its dtype.
    - `.npz`: one array per input, named by its key.
    """
    if not path.is_file():
        raise InvokeError(f"input file {path} does not exist; pass a .json, .npy or .npz file")
    if path.suffix == ".json":
        return _from_json(path)
    if path.suffix == ".npy":
        if not input_name:
            raise InvokeError(
                f"input file {path} holds one unnamed array; name the model input it feeds "
                "with --input-name"
            )
        return [_from_array(path, input_name, _load_numpy(path))]
    if path.suffix == ".npz":
        with _load_numpy(path) as arrays:
            return [_from_array(path, name, arrays[name]) for name in arrays.files]
    raise InvokeError(
        f"input file {path} has suffix {path.suffix!r}; use one of {', '.join(INPUT_FILE_SUFFIXES)}"
    )


def tokenize_text(
    text: str, tokenizer_dir: pathlib.Path, *, max_length: int | None = None, datatype: str = "INT64"
) -> list[NamedTensor]:
    """Token tensors (input_ids, attention_mask, ...) for one text, batch size 1.

    The tensor names are the tokenizer's output names, which is what models
    exported from transformers take. With `max_length`, the text is padded and
    truncated to it, for models built with a fixed sequence length.
    """
    if not (tokenizer_dir / "tokenizer_config.json").is_file() and not (tokenizer_dir / "tokenizer.json").is_file():
        raise InvokeError(
            f"tokenizer directory {tokenizer_dir} has no tokenizer_config.json or tokenizer.json; "
            "pass the directory the model's tokenizer was saved to (save_pretrained)"
        )
    if datatype not in ("INT32", "INT64"):
        raise InvokeError(f"token datatype {datatype!r} must be INT32 or INT64, the model inputs' type")
    from transformers import AutoTokenizer  # heavy; only text requests need it

    tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir), local_files_only=True)
    padding = {"padding": "max_length", "truncation": True, "max_length": max_length} if max_length else {}
    encoded = tokenizer([text], return_tensors="np", **padding)
    numpy_type = np.int32 if datatype == "INT32" else np.int64
    return [NamedTensor(name, datatype, np.asarray(values).astype(numpy_type)) for name, values in encoded.items()]


def text_tensor(text: str, input_name: str) -> NamedTensor:
    """The text itself as a BYTES tensor of shape [1, 1], for models that tokenize inside."""
    return NamedTensor(input_name, "BYTES", np.array([[text.encode()]], dtype=np.object_))


# What DALI's image decoder reads, by the files' first bytes (DALI fn.decoders.image docs).
IMAGE_SIGNATURES = ((b"\xff\xd8\xff", "JPEG"), (b"\x89PNG\r\n\x1a\n", "PNG"), (b"BM", "BMP"),
                    (b"II*\x00", "TIFF"), (b"MM\x00*", "TIFF"), (b"\x00\x00\x00\x0cjP  ", "JPEG 2000"),
                    (b"\xff\x4f\xff\x51", "JPEG 2000"))


def _image_file(path: pathlib.Path) -> bytes:
    """The file's bytes; InvokeError where it cannot be read or is not an encoded image."""
    try:
        data = path.read_bytes()
    except OSError as error:
        raise InvokeError(f"--image {path}: cannot be read ({error.strerror}); pass an image file") from None
    if not any(data.startswith(magic) for magic, _ in IMAGE_SIGNATURES) and not (
            data[:4] == b"RIFF" and data[8:12] == b"WEBP"):
        kinds = sorted({kind for _, kind in IMAGE_SIGNATURES} | {"WebP"})
        raise InvokeError(f"--image {path}: not an encoded image (first bytes {data[:8]!r}); allowed: "
                          f"{', '.join(kinds)} files, which the endpoint decodes; fix: pass the image "
                          "file itself, not a decoded array (that goes in --input)")
    return data


def image_bytes_tensor(paths: list[pathlib.Path], input_name: str) -> NamedTensor:
    """Encoded image files as one BYTES tensor [images, 1]: each file's bytes, unchanged, in a row of its own."""
    return NamedTensor(input_name, "BYTES", np.array([[_image_file(path)] for path in paths], dtype=np.object_))


def audio_bytes_tensor(paths: list[pathlib.Path], input_name: str) -> NamedTensor:
    """Audio files as one BYTES tensor [clips, 1]: each file's bytes, unchanged, in a row of its own (the endpoint
    decodes what libsndfile reads and names what it does not)."""
    return NamedTensor(input_name, "BYTES", np.array([[read_audio_file(path)] for path in paths], dtype=np.object_))


def read_audio_file(path: pathlib.Path) -> bytes:
    """One --audio file's bytes, as they are; InvokeError naming it where it cannot be read."""
    try:
        return path.read_bytes()
    except OSError as error:
        raise InvokeError(f"--audio {path}: cannot be read ({error.strerror}); pass an audio file") from None


def image_tensor(paths: list[pathlib.Path], input_name: str) -> NamedTensor:
    """Encoded image files as one UINT8 tensor [images, bytes], each row zero-padded to the longest file.

    The file bytes travel unchanged (the endpoint decodes them); Triton batches only equal shapes,
    and the decoders stop at the image's end marker, so the zero tail is ignored (dali_backend
    README, "Known limitations").
    """
    rows = []
    for path in paths:
        data = _image_file(path)
        rows.append(np.frombuffer(data, dtype=np.uint8))
    batch = np.zeros((len(rows), max(len(row) for row in rows)), dtype=np.uint8)
    for index, row in enumerate(rows):
        batch[index, :len(row)] = row
    return NamedTensor(input_name, "UINT8", batch)


def _from_json(path: pathlib.Path) -> list[NamedTensor]:
    try:
        document = json.loads(path.read_text())
    except ValueError as error:
        raise InvokeError(f"input file {path} is not valid JSON ({error})") from None
    entries = document.get("inputs") if isinstance(document, dict) else None
    if not isinstance(entries, list) or not entries:
        raise InvokeError(
            f"input file {path} needs a KServe v2 request: "
            '{"inputs": [{"name": ..., "shape": [...], "datatype": "FP32", "data": [...]}]}'
        )
    return [_from_json_entry(path, index, entry) for index, entry in enumerate(entries)]


def _from_json_entry(path: pathlib.Path, index: int, entry: object) -> NamedTensor:
    where = f"input file {path}, inputs[{index}]"
    if not isinstance(entry, dict):
        raise InvokeError(f"{where} is {entry!r}; each input is an object with name, shape, datatype, data")
    missing = [key for key in ("name", "shape", "datatype", "data") if key not in entry]
    if missing:
        raise InvokeError(f"{where} lacks {', '.join(missing)}; each input needs name, shape, datatype, data")
    datatype = entry["datatype"]
    if datatype not in DATATYPES:
        raise InvokeError(f"{where}: datatype {datatype!r} is not a KServe v2 datatype; use one of {', '.join(DATATYPES)}")
    if datatype == "BF16":
        raise InvokeError(f"{where}: BF16 values cannot be written in JSON; send them in an .npz file")
    from tritonclient.utils import triton_to_np_dtype

    shape = entry["shape"]
    try:
        if datatype == "BYTES":
            values = np.array([str(v).encode() for v in np.ravel(entry["data"])], dtype=np.object_)
        else:
            values = np.array(entry["data"], dtype=triton_to_np_dtype(datatype)).ravel()
        array = values.reshape(shape)
    except (ValueError, TypeError) as error:
        raise InvokeError(
            f"{where} ({entry['name']!r}): data does not fit datatype {datatype} and shape {shape} ({error})"
        ) from None
    return NamedTensor(str(entry["name"]), datatype, array)


def _from_array(path: pathlib.Path, name: str, array: np.ndarray) -> NamedTensor:
    from tritonclient.utils import np_to_triton_dtype

    datatype = np_to_triton_dtype(array.dtype)
    if datatype is None:
        raise InvokeError(f"array {name!r} in {path} has dtype {array.dtype}, which Triton has no datatype for")
    return NamedTensor(name, datatype, array)


def _load_numpy(path: pathlib.Path):
    try:
        return np.load(path, allow_pickle=False)
    except (ValueError, OSError) as error:
        raise InvokeError(f"input file {path} cannot be read by numpy ({error})") from None
