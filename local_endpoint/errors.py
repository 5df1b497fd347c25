"""User-facing errors of the local endpoint and the invoke client.

Every error here is a mistake the user can fix (a bad tarball, a busy port, a
rejected payload) or a server failure they need to see. Entry points print the
message and exit non-zero without a traceback, so each message names the file
or field, the value, what is allowed and the fix.
"""

from deployment_spec.parsing.errors import UserError


class LocalEndpointError(UserError):
    """Base class: the message is the whole story, printed as is (a UserError: one that reaches `tritonsm`'s main is
    printed there without a traceback, exit 2)."""


class TarballError(LocalEndpointError):
    """A model archive is missing, unreadable or laid out the wrong way."""


class NoSpaceError(LocalEndpointError):
    """The disk filled up while a model was unpacked or prepared (local_endpoint.server.disk_space)."""


class EnvironmentVariableError(LocalEndpointError):
    """A SageMaker container environment variable has a bad name or value."""


class UnsupportedBackendError(LocalEndpointError):
    """A model needs a Triton backend that the local server does not ship."""


class PortInUseError(LocalEndpointError):
    """The requested port is taken by another process."""


class ServerStartError(LocalEndpointError):
    """The Triton server exited or stayed unready during start-up."""


class ServerCrashedError(LocalEndpointError):
    """The Triton server (or another server of the endpoint) exited while it was serving.

    ``exit_code``: its exit status where the process is ours to see (negative: the signal), else None.
    """

    def __init__(self, message: str, exit_code: int | None = None) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class RestartLimitError(ServerCrashedError):
    """A supervised server (``local_endpoint.server.supervision``) failed more often than its restart bound allows."""


class InvokeError(LocalEndpointError):
    """A request could not be built, sent, or was rejected by the endpoint."""
