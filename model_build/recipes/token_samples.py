"""The parity cases' token inputs for a transformers text model: random ids, a padded row, a second segment."""
from __future__ import annotations

import torch

from deployment_spec.sections.model import Backend, ModelSpec
from model_build.recipes import model_facts


def id_type(model: ModelSpec) -> torch.dtype:
    """int32 token ids for TensorRT engines, int64 (transformers' own) otherwise."""
    return torch.int32 if model.backend is Backend.TENSORRT else torch.int64


def token_samples(net: torch.nn.Module, names: tuple[str, ...], seq: int, backend: Backend):
    """The parity cases' token inputs: ``sample(batch, seed)``, and the id rows end with (or None)."""
    vocab = model_facts.vocabulary_size(net)
    end = model_facts.end_id(net, vocab)
    dtype = torch.int32 if backend is Backend.TENSORRT else torch.int64

    def sample(batch: int, seed: int) -> dict[str, torch.Tensor]:
        gen = torch.Generator().manual_seed(seed)
        ids = torch.randint(5, vocab, (batch, seq), generator=gen, dtype=torch.int64)
        mask = torch.ones(batch, seq, dtype=torch.int64)
        mask[0, seq // 2:] = 0  # one padded row, so the mask path is compared too
        if end is not None:  # each row ends as the tokenizer ends it: some classifiers pool there
            ids[1:, -1] = end
            ids[0, seq // 2 - 1] = end
        types = torch.zeros(batch, seq, dtype=torch.int64)
        types[:, seq // 4:] = 1  # a second segment, as a text pair gives (token_type_ids only)
        return {name: tensor.to(dtype) for name, tensor in
                (("input_ids", ids), ("attention_mask", mask), ("token_type_ids", types)) if name in names}

    return sample, end
