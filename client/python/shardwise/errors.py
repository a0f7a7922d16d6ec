"""The one exception every call of the client raises."""


class ShardwiseError(Exception):
    """A failed call: `code` is the gRPC status code's name (e.g. "INVALID_ARGUMENT"),
    `message` the coordinator's explanation (or the client's, for what it refuses before
    a call), naming the field and value where it can."""

    def __init__(self, code, message):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.request_id = None  # a submission's, whose outcome may be unknown (submit)

    def __reduce__(self):
        # Rebuilt from code and message (Exception's default passes its one text), so
        # the error crosses processes (multiprocessing, concurrent.futures) intact.
        return ShardwiseError, (self.code, self.message), {"request_id": self.request_id}


def invalid_argument(message):
    return ShardwiseError("INVALID_ARGUMENT", message)
