"""The local SageMaker Runtime API that boto3, the AWS CLI and the SageMaker SDK talk to: named endpoints behind
one port (``local_runtime``), the HTTP front (``front``), InvokeEndpoint checked and routed as SageMaker does
(``routes``), SageMaker's error replies (``errors``), and serving until stopped (``cli``).
"""
