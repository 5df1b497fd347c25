"""The model as its authors wrote it: plain PyTorch, nothing of tritonsm in it."""
from __future__ import annotations

import torch

VOCABULARY = 1000
CLASSES = ("negative", "positive")


class ReviewClassifier(torch.nn.Module):
    """Token embeddings averaged over the real tokens (the attention mask says which), then two layers."""

    def __init__(self, width: int = 32) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(VOCABULARY, width)
        self.head = torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.ReLU(),
                                        torch.nn.Linear(width, len(CLASSES)))

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        keep = attention_mask.unsqueeze(-1).to(torch.float32)
        pooled = (self.embed(input_ids) * keep).sum(1) / keep.sum(1).clamp(min=1.0)
        return self.head(pooled)
