"""Facts about SageMaker and Triton that decide what a spec may ask for, each from its source: instance types
and their GPUs, the ``sagemaker-tritonserver`` images and the runtimes inside each release, where Triton's
metrics may listen, and SageMaker's rules on networks and inference components. Imports only ``parsing``."""
