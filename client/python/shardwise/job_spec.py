"""A job spec as the CLI reads one, from a YAML or JSON file (spec_yaml), a dict in the
spec's JSON form or a JobSpec, its relative paths made absolute against the caller's
directory: `spec_message(spec)`. The same file submitted by the CLI and by Python makes
the same job, or is refused for the same reason."""

import os

from google.protobuf import json_format

from shardwise.cpp_json import as_the_cli_reads_it
from shardwise.errors import ShardwiseError, invalid_argument
from shardwise.proto import job_spec_pb2
from shardwise.spec_yaml import read_file

# The spec fields that name files, as field paths of JobSpec: made absolute against the
# caller's directory, as the CLI does (the coordinator takes absolute paths only). The
# same fields as common/path_policy.cc's ForEachPathField.
_PATH_FIELDS = (("data", "safetensors_path"), ("data", "tokens", "train_path"),
                ("data", "tokens", "val_path"), ("data", "tokens", "tokenizer"),
                ("init", "safetensors_path"), ("init", "checkpoint_dir"),
                ("init", "huggingface", "dir"), ("output", "final_model_path"),
                ("output", "huggingface_dir"), ("output", "checkpoint_dir"))


def _working_directory(field, value):
    """The working directory, against which `field`'s relative `value` is made absolute;
    FAILED_PRECONDITION, as the CLI, where it cannot be read (removed)."""
    try:
        return os.getcwd()
    except OSError as error:
        raise ShardwiseError("FAILED_PRECONDITION", (
            f"{field}: '{value}' is relative, and the working directory cannot be read "
            f"({error.strerror}): give an absolute path or submit from a folder that "
            "exists")) from None


def _normal(path):
    """`path` made normal as the CLI's LexicallyNormal makes it: no '.', '..' or doubled
    '/', no trailing '/' (normpath keeps a leading '//', which POSIX allows)."""
    normal = os.path.normpath(path)
    return "/" + normal.lstrip("/") if normal.startswith("//") else normal


def _absolute_paths(message):
    """Makes the JobSpec `message`'s relative paths absolute against the working
    directory, and every path normal, in place, as the CLI does."""
    for path in _PATH_FIELDS:
        holder = message
        for name in path[:-1]:
            if not holder.HasField(name):
                holder = None
                break
            holder = getattr(holder, name)
        value = getattr(holder, path[-1]) if holder is not None else ""
        if value and not os.path.isabs(value):
            cwd = _working_directory("job." + ".".join(path), value)
            setattr(holder, path[-1], _normal(os.path.join(cwd, value)))
        elif value:
            setattr(holder, path[-1], _normal(value))
    return message


def spec_message(spec):
    """A JobSpec from a dict (the spec's JSON form, snake_case or lowerCamelCase field
    names), a YAML/JSON file's path or a JobSpec, its relative paths made absolute; the
    caller's dict or message is left as it was."""
    if isinstance(spec, job_spec_pb2.JobSpec):
        copy = job_spec_pb2.JobSpec()
        copy.CopyFrom(spec)
        return _absolute_paths(copy)
    prefix = ""
    if isinstance(spec, (str, os.PathLike)):
        prefix = f"{os.fspath(spec)}: "
        spec = read_file(os.fspath(spec))
    elif not isinstance(spec, dict):
        raise invalid_argument("job spec must be a mapping of fields (see docs/job-spec.md)")
    try:
        spec = as_the_cli_reads_it(spec, job_spec_pb2.JobSpec.DESCRIPTOR, "")
        message = json_format.ParseDict(spec, job_spec_pb2.JobSpec())
    except ShardwiseError as error:
        raise ShardwiseError(error.code, f"{prefix}{error.message}") from None
    except json_format.ParseError as error:
        raise invalid_argument(f"{prefix}job spec: {error}") from None
    return _absolute_paths(message)
