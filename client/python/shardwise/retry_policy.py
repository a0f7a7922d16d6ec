"""When the Python client calls a coordinator again, as the C++ client decides it
(client/retry_policy.h, and the up to five quick attempts its gRPC service config makes
of each call on UNAVAILABLE): pure decisions over the failure and the time, which the
client's loops ask and the tests drive.

A unary call (CallRetry), within a budget (two minutes):
  - RESOURCE_EXHAUSTED (the coordinator's queue of calls is full: the call never ran)
    is asked again, for every call; not gRPC's own for a message over a side's size
    limit ("Received message larger than max"), which the same request meets again;
  - DEADLINE_EXCEEDED on a connected channel (taken but not answered in time) and
    UNAVAILABLE on a connected channel (the coordinator's own answer: its state file
    refuses writes; the call changed nothing) are asked again for a call that may run
    twice (all but set_hook: submit carries a request id, cancel sets an end state,
    scale an absolute target);
  - UNAVAILABLE on a channel that is not connected (a coordinator restarting) is asked
    again until UNAVAILABLE_ATTEMPTS attempts in a row failed so, for a call that may
    run twice: as
    gRPC's retries make up to five attempts of each of the C++ client's calls, however
    many calls came before;
  - anything else is the caller's.
A watch (WatchRetry): a lost stream (UNAVAILABLE, CANCELLED, RESOURCE_EXHAUSTED) is
watched again for up to ten minutes of lost contact, counted from the first failure since
the last update. Before the first update it fails as a call does, unless the coordinator
serves as many watches as it allows (RESOURCE_EXHAUSTED: waited for) or cannot be reached
(UNAVAILABLE: until UNAVAILABLE_ATTEMPTS attempts in a row failed so).
Pauses double from 0.2 s up to 5 s; the caller draws each at random below its bound."""

import grpc

BUSY_RETRY_SECONDS = 120
UNAVAILABLE_ATTEMPTS = 5
WATCH_RETRY_SECONDS = 600
_WATCH_LOST = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED,
               grpc.StatusCode.RESOURCE_EXHAUSTED)
_FIRST_PAUSE, _LONGEST_PAUSE = 0.2, 5.0
# gRPC's words for a message past a side's size limit ("Received message larger than
# max (N vs. M)").
_MESSAGE_SIZE_REFUSAL = "message larger than max"


class _Pauses:
    """Pause bounds that double from the first up to the longest."""

    def __init__(self):
        self._next = _FIRST_PAUSE

    def take(self):
        pause, self._next = self._next, min(self._next * 2, _LONGEST_PAUSE)
        return pause

    def reset(self):
        self._next = _FIRST_PAUSE


class _InARow:
    """How many UNAVAILABLE answers came one after another, the latest included."""

    def __init__(self):
        self.count = 0

    def note(self, code):
        self.count = self.count + 1 if code == grpc.StatusCode.UNAVAILABLE else 0
        return self.count


class CallRetry:
    def __init__(self, start, repeatable, budget=BUSY_RETRY_SECONDS):
        self._give_up = start + budget
        self._repeatable = repeatable
        self._unavailable = _InARow()
        self._pauses = _Pauses()

    def after(self, code, connected, now, details=""):
        """After an attempt failed with `code` and `details` (its message) at `now`
        (seconds): the bound of the pause before the next, or None when the failure is
        the caller's."""
        # Only unreachable attempts count: the coordinator's own UNAVAILABLE (its state
        # file refusing writes) before a restart does not spend the restart's attempts.
        in_a_row = self._unavailable.note(None if connected else code)
        in_time = now < self._give_up
        unavailable = code == grpc.StatusCode.UNAVAILABLE
        busy = (code == grpc.StatusCode.RESOURCE_EXHAUSTED and in_time and
                _MESSAGE_SIZE_REFUSAL not in (details or ""))
        late = code == grpc.StatusCode.DEADLINE_EXCEEDED and in_time and connected
        refused_for_now = unavailable and in_time and connected
        away = unavailable and not connected and in_a_row < UNAVAILABLE_ATTEMPTS
        if busy or (self._repeatable and (late or refused_for_now or away)):
            return self._pauses.take()
        return None


class WatchRetry:
    def __init__(self, budget=WATCH_RETRY_SECONDS):
        self._budget = budget
        self.updated = False  # any update yet
        self._lost_since = None  # the first failure since the last update
        self._unavailable = _InARow()
        self._pauses = _Pauses()

    def update(self):
        """An update arrived: contact is back, and the pauses start from their first."""
        self.updated, self._lost_since = True, None
        self._unavailable.count = 0
        self._pauses.reset()

    def after(self, code, now):
        """The stream ended with `code` at `now`: the bound of the pause before the job
        is watched again, or None when the error is the caller's."""
        in_a_row = self._unavailable.note(code)
        self._lost_since = now if self._lost_since is None else self._lost_since
        before_first = (code == grpc.StatusCode.RESOURCE_EXHAUSTED or
                        (code == grpc.StatusCode.UNAVAILABLE and
                         in_a_row < UNAVAILABLE_ATTEMPTS))
        if ((not self.updated and not before_first) or code not in _WATCH_LOST or
                now >= self._lost_since + self._budget):
            return None
        return self._pauses.take()
