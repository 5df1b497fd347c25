"""The invoke client: a request built from tensors and input files (``request_inputs``, ``payload``), sent to a
local endpoint or a deployed SageMaker endpoint (``invoke``, over ``http_call``), and the answer decoded and
shown or saved (``payload``, ``response_output``). It imports nothing of the servers; they take SageMaker's
header names (``invoke``) and the plain HTTP call (``http_call``) from it.
"""
