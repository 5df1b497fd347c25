"""model_build: PyTorch models -> verified Triton model repositories -> deterministic SageMaker tarballs.

Entry point: ``tritonsm build`` (tritonsm/commands/build.py). Output: ``assets/*.tar.gz`` and
``assets/manifest.json`` (format: deployment_spec/builds/manifest.py), read by the CDK app.
Never imports aws_cdk; torch, onnx and onnxruntime are imported only inside build steps.
"""
