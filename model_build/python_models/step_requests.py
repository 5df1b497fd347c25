"""What the task steps' model.py files share inside Triton (shipped beside each of them): a client's mistake is
a ``RequestError``, answered as an HTTP 400 for its own request while the other requests of the batch are
answered. Standard library only."""


class RequestError(ValueError):
    """A client mistake: answered as 400 with this message."""


def parameter_number(value):
    """A request parameter's number: a JSON number, or a string holding one (clients whose parameters are all
    strings); None otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    try:
        return float(value)
    except ValueError:
        return None


def answer_requests(pb_utils, requests, compute):
    """One response per request: ``compute(request)``'s output tensors, or the RequestError it raised."""
    responses = []
    for request in requests:
        try:
            tensors = compute(request)
        except RequestError as exc:
            responses.append(pb_utils.InferenceResponse(output_tensors=[], error=client_error(pb_utils, str(exc))))
            continue
        responses.append(pb_utils.InferenceResponse(output_tensors=tensors))
    return responses


def client_error(pb_utils, message):
    # TritonError takes a status code from release 23.xx on (python_backend src/pb_error.h); INVALID_ARG -> 400.
    code = getattr(pb_utils.TritonError, "INVALID_ARG", None)
    return pb_utils.TritonError(message) if code is None else pb_utils.TritonError(message, code)
