"""The kinds of local endpoint, each started as SageMaker starts it: one model (``single_model``), many models
behind SageMaker's multi-model management (``multi_model``, with the model cache ``model_cache`` and the front
door ``mme_front_door``), inference components (``components``), and the one for a spec's endpoint
(``spec_servers``); ``lifecycle`` is what they share: their address, the check that they run, and stopping.
"""
