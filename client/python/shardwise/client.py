"""The Client: every JobService call, with errors as exceptions."""

import ipaddress
import os
import random
import secrets
import time

import grpc
import yaml
from google.protobuf import json_format

from shardwise.proto import job_pb2, job_service_pb2, job_service_pb2_grpc, job_spec_pb2

DEFAULT_ADDRESS = "127.0.0.1:7070"
_PAGE_SIZE = 500
_TIMEOUT_SECONDS = 10
# When a call is asked again (as the C++ client's client/retry_policy.h decides): one the
# coordinator refuses as busy (RESOURCE_EXHAUSTED: it never ran) for up to
# _BUSY_RETRY_SECONDS; one it took but answered late (DEADLINE_EXCEEDED on a connected
# channel) as long, when running it twice does no harm, and so one it answered UNAVAILABLE
# itself (on a connected channel: its state file refuses writes, the call changed
# nothing); one that finds it unreachable (UNAVAILABLE, as once while it restarts) up to
# _UNAVAILABLE_ATTEMPTS times, again when running it twice does no harm. Pauses double, drawn at random below their bound so that
# many clients do not come back together. Every call but set_hook may run twice: submit
# carries a request id, with which a retry returns the job the first one made; cancel
# sets an end state and scale an absolute target. A second set_hook would be refused
# while the first is agreed.
_BUSY_RETRY_SECONDS = 120
_UNAVAILABLE_ATTEMPTS = 5
# A watch whose stream is lost (a coordinator restarting or stopping) is made again for up
# to this long of lost contact.
_WATCH_RETRY_SECONDS = 600
_WATCH_LOST = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED,
               grpc.StatusCode.RESOURCE_EXHAUSTED)
# Pings find a connection that died without a word (the coordinator accepts one every 5 s).
# A job's record can pass gRPC's 4 MiB default (the events and membership history of a
# fault-tolerant job that has healed for weeks): 64 MiB, as the C++ client takes.
_CHANNEL_OPTIONS = (("grpc.keepalive_time_ms", 20000), ("grpc.keepalive_timeout_ms", 10000),
                    ("grpc.http2.max_pings_without_data", 0),
                    ("grpc.max_receive_message_length", 64 << 20))

# The spec fields that name files, as field paths of JobSpec: made absolute against the
# caller's directory, as the CLI does (the coordinator takes absolute paths only). The
# same fields as common/path_policy.cc's ForEachPathField.
_PATH_FIELDS = (("data", "safetensors_path"), ("data", "tokens", "train_path"),
                ("data", "tokens", "val_path"), ("data", "tokens", "tokenizer"),
                ("init", "safetensors_path"), ("init", "checkpoint_dir"),
                ("init", "huggingface", "dir"), ("output", "final_model_path"),
                ("output", "huggingface_dir"), ("output", "checkpoint_dir"))


class ShardwiseError(Exception):
    """A failed call: `code` is the gRPC status code's name (e.g. "INVALID_ARGUMENT"),
    `message` the coordinator's explanation, naming the field and value where it can."""

    def __init__(self, code, message):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


def _is_loopback(address):
    """Whether "host:port" (or a "dns:///", "ipv4:" or "ipv6:" target) reaches only this
    machine, as common/host_port.cc decides: localhost, or a numeric loopback address."""
    target = address
    for scheme in ("dns:///", "ipv4:", "ipv6:"):
        if target.startswith(scheme):
            target = target[len(scheme):]
            break
    if "," in target:
        return False
    host = target.rsplit(":", 1)[0] if target.count(":") == 1 or target.startswith("[") \
        else target
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _raise(error):
    raise ShardwiseError(error.code().name, error.details()) from None


def _absolute_paths(message, cwd):
    """Makes the JobSpec `message`'s relative paths absolute against `cwd`, in place."""
    for path in _PATH_FIELDS:
        holder = message
        for name in path[:-1]:
            if not holder.HasField(name):
                holder = None
                break
            holder = getattr(holder, name)
        value = getattr(holder, path[-1]) if holder is not None else ""
        if value and not os.path.isabs(value):
            setattr(holder, path[-1], os.path.normpath(os.path.join(cwd, value)))
    return message


def _spec_message(spec):
    """A JobSpec from a dict (the spec's JSON form, snake_case or lowerCamelCase field
    names) or a YAML/JSON file's path; the caller's dict is left as it was."""
    if isinstance(spec, job_spec_pb2.JobSpec):
        return spec
    if isinstance(spec, (str, os.PathLike)):
        with open(spec, encoding="utf-8") as file:
            spec = yaml.safe_load(file)
    if not isinstance(spec, dict):
        raise ShardwiseError("INVALID_ARGUMENT", "a job spec is a mapping of its fields")
    try:
        message = json_format.ParseDict(spec, job_spec_pb2.JobSpec())
    except json_format.ParseError as error:
        raise ShardwiseError("INVALID_ARGUMENT", f"job: {error}") from None
    return _absolute_paths(message, os.getcwd())


def _comm_hook(hook, wrapper):
    message = job_spec_pb2.CommHook()
    name = "NO_HOOK" if hook.lower() == "none" else hook.upper()
    if name not in job_spec_pb2.CommHook.Hook.keys():
        raise ShardwiseError("INVALID_ARGUMENT", f"hook: unknown hook '{hook}' (expected none, "
                             "allreduce, fp16_compress, bf16_compress or mixed_precision)")
    message.hook = job_spec_pb2.CommHook.Hook.Value(name)
    if wrapper:
        if wrapper.upper() not in job_spec_pb2.CommHook.Wrapper.keys():
            raise ShardwiseError("INVALID_ARGUMENT", f"wrapper: unknown wrapper '{wrapper}' "
                                 "(expected fp16_wrapper or bf16_wrapper)")
        message.wrapper = job_spec_pb2.CommHook.Wrapper.Value(wrapper.upper())
    return message


class Client:
    """A connection to one coordinator. `address` defaults to $SHARDWISE_COORDINATOR, else
    127.0.0.1:7070; `tls_ca` (a CA file, default $SHARDWISE_TLS_CA) makes it TLS; `token`
    (default $SHARDWISE_TOKEN) is sent as a bearer token. Thread-safe, as gRPC channels are."""

    def __init__(self, address=None, tls_ca=None, token=None):
        self.address = address or os.environ.get("SHARDWISE_COORDINATOR") or DEFAULT_ADDRESS
        tls_ca = tls_ca or os.environ.get("SHARDWISE_TLS_CA")
        token = token or os.environ.get("SHARDWISE_TOKEN")
        if token and not tls_ca and not _is_loopback(self.address):
            raise ShardwiseError(
                "FAILED_PRECONDITION",
                f"refusing to send a token in plaintext to {self.address}: anyone on the way "
                "could read it. Give the CA of the coordinator's certificate (tls_ca, or "
                "$SHARDWISE_TLS_CA)")
        if tls_ca:
            with open(tls_ca, "rb") as file:
                credentials = grpc.ssl_channel_credentials(root_certificates=file.read())
            self._channel = grpc.secure_channel(self.address, credentials,
                                                options=_CHANNEL_OPTIONS)
        else:
            self._channel = grpc.insecure_channel(self.address, options=_CHANNEL_OPTIONS)
        self._connectivity = None
        self._channel.subscribe(self._note_connectivity)
        self._metadata = (("authorization", f"Bearer {token.strip()}"),) if token else ()
        self._stub = job_service_pb2_grpc.JobServiceStub(self._channel)

    def close(self):
        self._channel.unsubscribe(self._note_connectivity)
        self._channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *unused):
        self.close()

    def _note_connectivity(self, connectivity):
        self._connectivity = connectivity

    def _call(self, method, request, repeatable=True):
        give_up = time.monotonic() + _BUSY_RETRY_SECONDS
        pause, attempt = 0.2, 0
        while True:
            attempt += 1
            try:
                return method(request, timeout=_TIMEOUT_SECONDS, metadata=self._metadata)
            except grpc.RpcError as error:
                code = error.code()
                in_time = time.monotonic() < give_up
                busy = code == grpc.StatusCode.RESOURCE_EXHAUSTED and in_time
                connected = self._connectivity == grpc.ChannelConnectivity.READY
                late = (code == grpc.StatusCode.DEADLINE_EXCEEDED and repeatable and in_time and
                        connected)
                refused_for_now = (code == grpc.StatusCode.UNAVAILABLE and repeatable and
                                   in_time and connected)
                away = (code == grpc.StatusCode.UNAVAILABLE and repeatable and
                        attempt < _UNAVAILABLE_ATTEMPTS)
                if not (busy or late or refused_for_now or away):
                    _raise(error)
            time.sleep(random.uniform(0, pause))
            pause = min(pause * 2, 5.0)

    def submit(self, spec):
        """Submits a spec (a dict, a YAML/JSON file's path, or a JobSpec); returns the job's id."""
        request = job_service_pb2.SubmitJobRequest(spec=_spec_message(spec),
                                                   request_id=secrets.token_hex(16))
        return self._call(self._stub.SubmitJob, request).job_id

    def get(self, job_id):
        """The job (shardwise.proto.job_pb2.Job), with its spec, progress and events: the
        first 20 and the newest 1000; `events_omitted` more came after the first
        `events_omitted_after` (the coordinator's state file keeps them)."""
        return self._call(self._stub.GetJob, job_service_pb2.GetJobRequest(job_id=job_id))

    def list(self, states=(), submitter="", limit=None):
        """Job summaries, oldest first, following the coordinator's pages; `states` are
        names or values of shardwise.PENDING, RUNNING, ..."""
        request = job_service_pb2.ListJobsRequest(submitter=submitter)
        for state in states:
            request.states.append(job_pb2.JobState.Value(state) if isinstance(state, str) else state)
        jobs = []
        while True:
            request.page_size = _PAGE_SIZE if limit is None else min(_PAGE_SIZE, limit - len(jobs))
            page = self._call(self._stub.ListJobs, request)
            jobs.extend(page.jobs)
            request.page_token = page.next_page_token
            if not page.next_page_token or (limit is not None and len(jobs) >= limit):
                return jobs

    def watch(self, job_id):
        """An iterator of the job: as it is now, then after every change, until it ends.
        A lost stream (a coordinator restarting) is watched again, for up to ten minutes
        of lost contact (counted from the first failure since the last update); past
        that, ShardwiseError UNAVAILABLE. Before the first update it fails as any call
        does (a wrong address is told at once), unless the coordinator answered that it
        serves as many watches as it allows (RESOURCE_EXHAUSTED): that waits for room."""
        updated, lost_since = False, None
        pause = 0.2
        while True:
            try:
                for job in self._stub.WatchJob(job_service_pb2.WatchJobRequest(job_id=job_id),
                                               metadata=self._metadata):
                    updated, lost_since = True, None
                    pause = 0.2
                    yield job
                return
            except grpc.RpcError as error:
                now = time.monotonic()
                lost_since = now if lost_since is None else lost_since
                full = error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
                if ((not updated and not full) or error.code() not in _WATCH_LOST or
                        now >= lost_since + _WATCH_RETRY_SECONDS):
                    _raise(error)
            time.sleep(random.uniform(pause / 2, pause))
            pause = min(pause * 2, 5.0)

    def cancel(self, job_id):
        """Cancels a pending or running job; returns it."""
        return self._call(self._stub.CancelJob, job_service_pb2.CancelJobRequest(job_id=job_id))

    def set_hook(self, job_id, hook, wrapper=None):
        """Proposes a change of a running job's communication hook ("bf16_compress", ...);
        returns the proposal (its step; the job's hook_switches say when it applied)."""
        request = job_service_pb2.SetCommHookRequest(job_id=job_id, hook=_comm_hook(hook, wrapper))
        return self._call(self._stub.SetCommHook, request, repeatable=False)

    def scale(self, job_id, replicas):
        """Sets how many replica groups a running fault-tolerant job trains with (groups
        above it leave after their step; groups join below it, up to the spec's
        fault_tolerance.max_replicas); returns the job."""
        request = job_service_pb2.ScaleJobRequest(job_id=job_id, replicas=replicas)
        return self._call(self._stub.ScaleJob, request)

    def workers(self):
        """Every registered worker."""
        request = job_service_pb2.ListWorkersRequest(page_size=_PAGE_SIZE)
        workers = []
        while True:
            page = self._call(self._stub.ListWorkers, request)
            workers.extend(page.workers)
            request.page_token = page.next_page_token
            if not page.next_page_token:
                return workers
