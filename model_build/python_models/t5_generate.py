"""Triton Python-backend model: T5 text-to-text generation (e.g. "translate English to German: ...").

Input ``TEXT`` (TYPE_STRING); outputs ``OUTPUT_TEXT`` (TYPE_STRING) and ``output_ids`` (TYPE_INT64,
padded with the pad id). All requests of a dynamic batch run through one ``generate`` call.
Needs torch, transformers and tokenizers in the backend's Python: the stock SageMaker Triton
image has none of them, so the build ships an execution environment with them in the model
directory (the recipe's pinned requirements, or the spec's ``python`` section) and sets
``parameters { key: "EXECUTION_ENV_PATH" value { string_value: "$$TRITON_MODEL_DIRECTORY/<file>" } }``.
Weights (``t5/``) and ``tokenizer.json`` sit next to this file.
"""
import json
import os

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        import torch
        from tokenizers import Tokenizer
        from transformers import T5ForConditionalGeneration

        config = json.loads(args["model_config"])
        params = {k: v["string_value"] for k, v in config.get("parameters", {}).items()}
        here = os.path.join(args["model_repository"], args["model_version"])
        kind = args.get("model_instance_kind", "CPU")
        self.device = f"cuda:{args['model_instance_device_id']}" if kind == "GPU" and torch.cuda.is_available() else "cpu"
        self.max_input = int(params.get("max_input_length", "128"))
        self.max_new_tokens = int(params.get("max_new_tokens", "32"))
        self.tokenizer = Tokenizer.from_file(os.path.join(here, "tokenizer.json"))
        self.pad_id = self.tokenizer.token_to_id("<pad>") or 0
        self.tokenizer.enable_truncation(self.max_input)
        self.tokenizer.enable_padding(pad_id=self.pad_id, pad_token="<pad>")
        self.model = T5ForConditionalGeneration.from_pretrained(os.path.join(here, "t5")).to(self.device).eval()
        self.torch = torch

    def execute(self, requests):
        texts, counts = [], []
        for request in requests:
            batch = pb_utils.get_input_tensor_by_name(request, "TEXT").as_numpy().reshape(-1)
            texts.extend(t.decode("utf-8") if isinstance(t, bytes) else str(t) for t in batch)
            counts.append(len(batch))
        encoded = self.tokenizer.encode_batch(texts)
        ids = self.torch.tensor([e.ids for e in encoded], device=self.device)
        mask = self.torch.tensor([e.attention_mask for e in encoded], device=self.device)
        with self.torch.no_grad():
            generated = self.model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=self.max_new_tokens,
                                            do_sample=False).cpu().numpy().astype(np.int64)
        decoded = self.tokenizer.decode_batch(generated.tolist(), skip_special_tokens=True)
        responses, start = [], 0
        for count in counts:
            rows = slice(start, start + count)
            start += count
            text = np.array([s.encode("utf-8") for s in decoded[rows]], dtype=np.object_).reshape(count, 1)
            responses.append(pb_utils.InferenceResponse(output_tensors=[
                pb_utils.Tensor("OUTPUT_TEXT", text), pb_utils.Tensor("output_ids", generated[rows])]))
        return responses

    def finalize(self):
        self.model = None
        self.tokenizer = None
