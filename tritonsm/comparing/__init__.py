"""`tritonsm compare`: an endpoint's incumbent and candidate variants side by side, read from their data capture.

window (the --since/--until time window and its hour folders), records (one captured record), sources (local
folders or S3), pairing (the same request seen by both variants), agreement (their answers compared), latency (the
captures' own figures and the errors), cloudwatch (a deployed variant's ModelLatency), report (the table and the
JSON), plot (the PNG). Only the standard library at import time; numpy, matplotlib, boto3 and tritonclient load
inside the functions that need them.
"""
