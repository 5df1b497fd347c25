"""`tritonsm serve --shadow-queue-size`: how many copies of production requests may wait for the shadow's server
(``local_endpoint.variants.shadow``, which holds the bounds and says what a drop costs)."""
from __future__ import annotations

import argparse

from deployment_spec.parsing.errors import UserError


def shadow_queue_size(args: argparse.Namespace) -> int:
    """The flag's value, checked (left out: the worker's default); out of range, a UserError naming the flag."""
    from local_endpoint.errors import LocalEndpointError  # late: local_endpoint loads numpy
    from local_endpoint.variants.shadow import MAX_PENDING, check_queue_size

    if args.shadow_queue_size is None:
        return MAX_PENDING
    try:
        return check_queue_size(args.shadow_queue_size)
    except LocalEndpointError as error:
        raise UserError(str(error)) from None
