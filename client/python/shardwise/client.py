"""The Client: submit, get, list, watch, cancel, set_hook, scale, timeline and workers
(every call of the JobService), with errors as exceptions."""

import operator
import random
import secrets
import time
import weakref

import grpc

from shardwise import arguments, settings
from shardwise.retry_policy import CallRetry, WatchRetry
from shardwise.errors import ShardwiseError
from shardwise.job_spec import spec_message
from shardwise.proto import job_pb2, job_service_pb2, job_service_pb2_grpc, job_spec_pb2

_PAGE_SIZE = 500
_TIMEOUT_SECONDS = 10
# Pings find a connection that died without a word (the coordinator accepts one every 5 s).
# A job's record can pass gRPC's 4 MiB default (the events and membership history of a
# fault-tolerant job that has healed for weeks): 64 MiB, as the C++ client takes.
_CHANNEL_OPTIONS = (("grpc.keepalive_time_ms", 20000), ("grpc.keepalive_timeout_ms", 10000),
                    ("grpc.http2.max_pings_without_data", 0),
                    ("grpc.max_receive_message_length", 64 << 20))


def _raise(error, address, connected):
    """Raises a failed call as ShardwiseError, telling a coordinator not reached (a wrong
    address, one not running) from one reached but late, as the C++ client does."""
    code, details = error.code(), error.details()
    late = code == grpc.StatusCode.DEADLINE_EXCEEDED
    if late and connected:
        raise ShardwiseError("DEADLINE_EXCEEDED", (
            f"the coordinator at {address} is reachable but did not answer within "
            f"{_TIMEOUT_SECONDS}s (it is busy: see its shardwise_coordinator_* metrics)")) from None
    # UNAVAILABLE on a connected channel is the coordinator's own answer (its state file
    # refuses writes), whose message says so.
    if late or (code == grpc.StatusCode.UNAVAILABLE and not connected):
        raise ShardwiseError("UNAVAILABLE", (
            f"cannot reach the coordinator at {address} (is shardwise-coordinator running "
            f"there? pass its address, or set SHARDWISE_COORDINATOR): {details}")) from None
    raise ShardwiseError(code.name, details) from None


def _enum_value(enum, value, field):
    """The value of `enum` (a protobuf enum type) that `value` names (any case), or
    `value` itself when it is a number; INVALID_ARGUMENT naming `field` otherwise. The
    UNSPECIFIED value (0) names nothing to filter by, and is refused too."""
    names = [name for name in enum.keys() if enum.Value(name) != 0]
    if not isinstance(value, str):
        # A bool is an int to Python, equal to the value 1 or 0 below: refused as well.
        if (not arguments.is_integer(value) or
                operator.index(value) not in [enum.Value(name) for name in names]):
            raise ShardwiseError("INVALID_ARGUMENT",
                                 f"{field}: unknown value {arguments.shown(value)}")
        return operator.index(value)
    if value.upper() not in names:
        raise ShardwiseError("INVALID_ARGUMENT", f"{field}: unknown {field.rstrip('s')} "
                             f"{arguments.shown(value)} (expected {', '.join(names[:-1])} "
                             f"or {names[-1]})")
    return enum.Value(value.upper())


def _comm_hook(hook, wrapper):
    hook, wrapper = arguments.text(hook, "hook"), arguments.optional_text(wrapper, "wrapper")
    message = job_spec_pb2.CommHook()
    name = "NO_HOOK" if hook.lower() == "none" else hook.upper()
    if name not in job_spec_pb2.CommHook.Hook.keys():
        raise ShardwiseError("INVALID_ARGUMENT", f"hook: unknown hook {arguments.shown(hook)} "
                             "(expected none, allreduce, fp16_compress, bf16_compress or "
                             "mixed_precision)")
    message.hook = job_spec_pb2.CommHook.Hook.Value(name)
    if wrapper:
        if wrapper.upper() not in job_spec_pb2.CommHook.Wrapper.keys():
            raise ShardwiseError("INVALID_ARGUMENT",
                                 f"wrapper: unknown wrapper {arguments.shown(wrapper)} "
                                 "(expected fp16_wrapper or bf16_wrapper)")
        message.wrapper = job_spec_pb2.CommHook.Wrapper.Value(wrapper.upper())
    return message


# The longest timeout handed to gRPC: its deadline is an int64 of nanoseconds from now,
# which a "forever" (1e10 s) overflows. A longer watch is bounded by its own loop.
_LONGEST_GRPC_TIMEOUT = 365 * 86400.0


def _checked_limit(limit):
    """A list's `limit` as an int, None for all (None or 0); negative refused."""
    limit = arguments.optional_integer(limit, "limit")
    if limit is not None and limit < 0:
        raise ShardwiseError("INVALID_ARGUMENT", f"limit: {limit} is negative (0: all)")
    return limit or None


def _watch_timed_out(job_id, timeout, last, lost=None):
    """DEADLINE_EXCEEDED for a watch whose `timeout` passed before job `job_id` ended;
    `lost`, the latest failure of the watch, says why no update came."""
    if last is not None:
        seen = f" (it was {job_pb2.JobState.Name(last.state)} when last seen)"
    elif lost is not None:
        seen = f" (no update came; the watch's latest failure: {lost.code}: {lost.message})"
    else:
        seen = " (no update came)"
    return ShardwiseError("DEADLINE_EXCEEDED",
                          f"job {job_id} did not end within the watch's timeout of {timeout:g} s"
                          f"{seen}")


class Client:
    """A connection to one coordinator. `address` defaults to $SHARDWISE_COORDINATOR, else
    127.0.0.1:7070; `tls_ca` (a CA file, default $SHARDWISE_TLS_CA) makes it TLS; `token`
    (default $SHARDWISE_TOKEN), or the one in `token_file` (as the CLI's --token_file), is
    sent as a bearer token. Thread-safe, as gRPC channels are."""

    def __init__(self, address=None, tls_ca=None, token=None, token_file=None):
        self.address = settings.resolve_address(address)
        tls_ca, tls_ca_source = settings.resolve_tls_ca(tls_ca)
        token = settings.resolve_token(token, token_file)
        settings.check_token_transport(self.address, tls_ca, token)
        if tls_ca:
            root_certificates = settings.read_tls_ca(tls_ca, tls_ca_source)
            credentials = grpc.ssl_channel_credentials(root_certificates=root_certificates)
            self._channel = grpc.secure_channel(self.address, credentials,
                                                options=_CHANNEL_OPTIONS)
        else:
            self._channel = grpc.insecure_channel(self.address, options=_CHANNEL_OPTIONS)
        self._metadata = (("authorization", f"Bearer {token}"),) if token else ()
        self._stub = job_service_pb2_grpc.JobServiceStub(self._channel)
        self._closed = False
        # gRPC never closes a channel it collects (its connection and completion queue
        # would live on); this closes it once the client is collected, or at the
        # interpreter's exit, when a channel collected after gRPC's threads stopped would
        # wait for them forever. It holds the channel, never the client.
        self._close_channel = weakref.finalize(self, self._channel.close)

    def close(self):
        """Closes the channel (a client let go is closed when collected; one left open is
        closed at the interpreter's exit)."""
        if self._closed:
            return
        self._closed = True
        self._close_channel()

    def __enter__(self):
        return self

    def __exit__(self, *unused):
        self.close()

    def _connected(self):
        """Whether the channel is connected now. Read from the channel itself: gRPC's
        Python API tells connectivity only to subscribers, through a polling thread per
        channel that would keep the client alive for good. That reading is gRPC's own
        (private) state: a release that moved it reads as not connected, never as an
        error in place of the call's."""
        if self._closed:
            return False
        try:
            channel = self._channel._channel  # pylint: disable=protected-access
            state = grpc._common.CYGRPC_CONNECTIVITY_STATE_TO_CHANNEL_CONNECTIVITY[  # pylint: disable=protected-access
                channel.check_connectivity_state(False)]
        except (AttributeError, KeyError, ValueError):
            return False
        return state == grpc.ChannelConnectivity.READY

    def _check_open(self):
        """Refuses a call on a closed client (gRPC would raise a ValueError): also where
        gRPC's error came from a close() by another thread, in place of that error."""
        if self._closed:
            raise ShardwiseError("FAILED_PRECONDITION", f"the client of {self.address} is "
                                 "closed (close() was called)") from None

    def _call(self, method, request, repeatable=True):
        """Calls `method`, asking again as retry_policy.CallRetry decides. Every call but
        set_hook may run twice (`repeatable`). A close() from another thread ends it with
        FAILED_PRECONDITION, between attempts or during one."""
        retry = CallRetry(time.monotonic(), repeatable)
        while True:
            self._check_open()
            try:
                return method(request, timeout=_TIMEOUT_SECONDS, metadata=self._metadata)
            except ValueError:  # gRPC's word for a channel closed under the call
                self._check_open()
                raise
            except grpc.RpcError as error:
                self._check_open()
                connected = self._connected()
                pause = retry.after(error.code(), connected, time.monotonic(),
                                    error.details())
                if pause is None:
                    _raise(error, self.address, connected)
            time.sleep(random.uniform(0, pause))

    def submit(self, spec, request_id=None):
        """Submits a spec (a dict, a YAML/JSON file's path, or a JobSpec); returns the job's id.
        `request_id` (default: a new one) makes the job at most once: a submission whose
        outcome is unknown (a ShardwiseError such as UNAVAILABLE, DEADLINE_EXCEEDED,
        RESOURCE_EXHAUSTED, UNKNOWN or INTERNAL: any but a refusal, as the CLI's exit 3;
        the error's `request_id` attribute holds the id) is made again with the same id,
        and returns the job the
        first one made, if it did. The coordinator checks the spec (the C++ client checks
        it before sending too): a spec it refuses raises INVALID_ARGUMENT naming the field."""
        request_id = arguments.optional_text(request_id, "request_id") or secrets.token_hex(16)
        request = job_service_pb2.SubmitJobRequest(spec=spec_message(spec), request_id=request_id)
        try:
            return self._call(self._stub.SubmitJob, request).job_id
        except ShardwiseError as error:
            error.request_id = request_id
            raise

    def get(self, job_id):
        """The job (shardwise.proto.job_pb2.Job), with its spec, progress and events: the
        first 20 and the newest 1000; `events_omitted` more came after the first
        `events_omitted_after` (the coordinator's state file keeps them); for a
        fault-tolerant job, `membership_history`: the first 10 epochs and the newest 200,
        `membership_epochs_omitted` more after the first `membership_epochs_omitted_after`."""
        request = job_service_pb2.GetJobRequest(job_id=arguments.text(job_id, "job_id"))
        return self._call(self._stub.GetJob, request)

    def list(self, states=(), submitter="", limit=None):
        """Job summaries, oldest first, following the coordinator's pages; `states` are
        names (any case) or values of shardwise.PENDING, RUNNING, ... (one alone, or a
        list); at most `limit` (None or 0: all)."""
        limit = _checked_limit(limit)
        request = job_service_pb2.ListJobsRequest(
            submitter=arguments.text(submitter, "submitter"))
        for state in arguments.names(states, "states"):
            request.states.append(_enum_value(job_pb2.JobState, state, "states"))
        return self._pages(self._stub.ListJobs, request, "jobs", limit)

    def watch(self, job_id, timeout=None, on_lost=None):
        """An iterator of the job: as it is now, then its newest version after each change
        (a slow reader skips versions in between, never the final one), until it ends.
        A lost stream (a coordinator restarting) is watched again, for up to ten minutes
        of lost contact (counted from the first failure since the last update), each
        loss told to `on_lost` (a callable, given its ShardwiseError) where one is given,
        as the CLI says "watching JOB again"; past that, the last failure's ShardwiseError
        (UNAVAILABLE for a coordinator not reached; its own code, such as
        RESOURCE_EXHAUSTED, for one that answered). Before the first update it fails as
        any call does (a wrong address is told at once), unless the coordinator answered
        that it serves as many watches as it allows (RESOURCE_EXHAUSTED): that waits for
        room. `timeout` (seconds; None: none) bounds the whole watch: a job that has not
        ended by then raises DEADLINE_EXCEEDED naming the state it was last seen in. The
        arguments are checked at once, not at the first next()."""
        arguments.text(job_id, "job_id")
        timeout = arguments.optional_seconds(timeout, "timeout")
        if on_lost is not None and not callable(on_lost):
            raise ShardwiseError("INVALID_ARGUMENT", "on_lost: expected a callable, got "
                                 f"{type(on_lost).__name__} {arguments.shown(on_lost)}")
        self._check_open()
        # From the call, not the first next(): the timeout bounds the whole watch.
        deadline = None if timeout is None else time.monotonic() + timeout
        return self._watch(job_id, timeout, deadline, on_lost)

    def _watch(self, job_id, timeout, deadline, on_lost):
        retry = WatchRetry()
        last = None  # the newest version seen
        lost = None  # the latest failure
        while True:
            self._check_open()
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise _watch_timed_out(job_id, timeout, last, lost)
            stream = None
            try:
                grpc_timeout = (None if remaining is None or remaining > _LONGEST_GRPC_TIMEOUT
                                else remaining)
                stream = self._stub.WatchJob(job_service_pb2.WatchJobRequest(job_id=job_id),
                                             timeout=grpc_timeout, metadata=self._metadata)
                for job in stream:
                    retry.update()
                    last = job
                    yield job
                if not retry.updated:  # as the C++ client: never an end without the job's
                    raise ShardwiseError("UNAVAILABLE", "the watch ended before any update")
                return
            except ValueError:  # gRPC's word for a channel closed under the watch
                self._check_open()
                raise
            except grpc.RpcError as error:
                self._check_open()
                if deadline is not None and error.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
                    raise _watch_timed_out(job_id, timeout, last, lost) from None
                pause = retry.after(error.code(), time.monotonic())
                if pause is None:
                    _raise(error, self.address, self._connected())
                lost = ShardwiseError(error.code().name, error.details() or "")
                # A stream lost, as the CLI's "watching JOB again": not the retries of the
                # first call (gRPC's own, in the C++ client), except a wait for room.
                if on_lost is not None and (retry.updated or
                                            error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED):
                    on_lost(lost)
            finally:
                # A watch its caller let go (closed, or collected) ends its stream now: it
                # holds one of the coordinator's --max_watches until it does.
                if stream is not None:
                    stream.cancel()
            pause = random.uniform(pause / 2, pause)
            if deadline is not None:
                pause = min(pause, max(0.0, deadline - time.monotonic()))
            time.sleep(pause)

    def cancel(self, job_id):
        """Cancels a pending or running job; returns it."""
        request = job_service_pb2.CancelJobRequest(job_id=arguments.text(job_id, "job_id"))
        return self._call(self._stub.CancelJob, request)

    def set_hook(self, job_id, hook, wrapper=None):
        """Proposes a change of a running job's communication hook ("bf16_compress", ...);
        returns the proposal (its step; the job's hook_switches say when it applied)."""
        request = job_service_pb2.SetCommHookRequest(job_id=arguments.text(job_id, "job_id"),
                                                     hook=_comm_hook(hook, wrapper))
        return self._call(self._stub.SetCommHook, request, repeatable=False)

    def scale(self, job_id, replicas):
        """Sets how many replica groups a running fault-tolerant job trains with (groups
        above it leave after their step; groups join below it, up to the spec's
        fault_tolerance.max_replicas); returns the job."""
        replicas = arguments.integer(replicas, "replicas", bits=32)  # the request's int32
        request = job_service_pb2.ScaleJobRequest(job_id=arguments.text(job_id, "job_id"),
                                                  replicas=replicas)
        return self._call(self._stub.ScaleJob, request)

    def timeline(self, job_id):
        """The spans (forward/backward per unit, collectives, optimizer, steps) of the job's
        latest attempt, rank by rank, as far as the coordinator still holds them
        (shardwise.proto.job_pb2.Timeline; `shardwise timeline` writes one as a Chrome
        trace)."""
        request = job_service_pb2.GetTimelineRequest(job_id=arguments.text(job_id, "job_id"))
        return self._call(self._stub.GetTimeline, request)

    def workers(self, states=(), device=None, limit=None):
        """Every registered worker, sorted by id, or those in one of `states` (names in any
        case, or values: IDLE, BUSY, DRAINING, LOST; one alone, or a list) and of `device`
        ("cpu" or "cuda"); at most `limit` (None or 0: all), as `get workers --limit`."""
        limit = _checked_limit(limit)
        request = job_service_pb2.ListWorkersRequest()
        for state in arguments.names(states, "states"):
            request.states.append(_enum_value(job_pb2.WorkerState, state, "states"))
        if device is not None:
            request.device = _enum_value(job_spec_pb2.DeviceKind, device, "device")
        return self._pages(self._stub.ListWorkers, request, "workers", limit)

    def _pages(self, method, request, field, limit):
        """The `field` items of `method`'s pages, followed until `limit` (None: all)."""
        items = []
        while True:
            request.page_size = _PAGE_SIZE if limit is None else min(_PAGE_SIZE,
                                                                     limit - len(items))
            page = self._call(method, request)
            items.extend(getattr(page, field))
            request.page_token = page.next_page_token
            if not page.next_page_token or (limit is not None and len(items) >= limit):
                return items
