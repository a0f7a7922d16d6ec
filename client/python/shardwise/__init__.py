"""Shardwise's Python client: submit, follow and change training jobs from notebooks and
pipelines. A small layer over the coordinator's JobService (gRPC, Debian's python3-grpcio),
with the same defaults as the `shardwise` CLI.

    import shardwise
    client = shardwise.Client()                      # $SHARDWISE_COORDINATOR, else 127.0.0.1:7070
    job_id = client.submit("examples/demo.yaml")     # or a dict in the job spec's JSON form
    for job in client.watch(job_id):                 # the job now, then as it changes
        print(job.progress.step, job.progress.loss)
    client.get(job_id).state == shardwise.SUCCEEDED

Every call raises shardwise.ShardwiseError, carrying the gRPC status code's name (.code,
such as "UNAVAILABLE") and the coordinator's message, when it fails.
"""

from shardwise.client import Client
from shardwise.errors import ShardwiseError
from shardwise.proto.job_pb2 import (CANCELLED, FAILED, PENDING, RUNNING, SCHEDULED,
                                     SUCCEEDED)

__all__ = ["Client", "ShardwiseError", "PENDING", "SCHEDULED", "RUNNING", "SUCCEEDED",
           "FAILED", "CANCELLED"]
