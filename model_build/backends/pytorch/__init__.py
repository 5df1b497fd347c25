"""``backend: pytorch`` (``pytorch_libtorch``): TorchScript traces and users' TorchScript files."""
