"""``python -m triton_sagemaker_stacks``: the spec app for the CDK CLI, in the folder of the cdk.json that names it
(``"app": "python -m triton_sagemaker_stacks"``; docs/howto/install.md)."""
import pathlib
import sys

from .spec_app import main

sys.exit(main(pathlib.Path.cwd()))
