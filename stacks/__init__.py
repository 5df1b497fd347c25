"""Thin stacks: what deploys together. They compose ``triton_constructs``; ``app.py`` composes them."""
from stacks.endpoint_stack import EndpointStack
from stacks.stage import TritonStage
from stacks.storage_stack import StorageStack

__all__ = ["EndpointStack", "StorageStack", "TritonStage"]
