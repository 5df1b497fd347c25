"""`tritonsm serve`'s restart flags (``--max-restarts``, ``--restart-window``, ``--unhealthy-after``) as the local
endpoint's ``RestartPolicy``: how often a failed Triton server is restarted (``local_endpoint.server.supervision``).
"""
from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from deployment_spec.parsing.errors import UserError

if TYPE_CHECKING:   # imported late below: local_endpoint loads numpy, which every other command can do without
    from local_endpoint.server.supervision import RestartPolicy


def restart_flags(args: argparse.Namespace) -> list[tuple[str, object]]:
    """The restart flags as given (None: not given), to pass on to `local_endpoint.cli.serve_main`."""
    return [("--max-restarts", args.max_restarts), ("--restart-window", args.restart_window),
            ("--unhealthy-after", args.unhealthy_after)]


def restart_policy(args: argparse.Namespace) -> RestartPolicy:
    """The ``RestartPolicy`` of the flags (a flag left out: its default); a value out of range is a UserError
    naming the flag."""
    from local_endpoint.errors import LocalEndpointError
    from local_endpoint.server.supervision import RestartPolicy

    given = {key: value for key, value in (("max_restarts", args.max_restarts), ("window_s", args.restart_window),
                                           ("unhealthy_after_s", args.unhealthy_after)) if value is not None}
    try:
        return RestartPolicy(**given)
    except LocalEndpointError as error:
        raise UserError(str(error)) from None
