"""A job spec as the CLI reads one (contracts/job_spec_io.cc), from a YAML or JSON file, a
dict in the spec's JSON form or a JobSpec, with its relative paths made absolute against
the caller's directory: `spec_message(spec)`. The same file submitted by the CLI and by
Python makes the same job, or is refused for the same reason."""

import os
import re
import stat

import yaml
from google.protobuf import json_format

from shardwise.errors import ShardwiseError
from shardwise.proto import job_spec_pb2

# A job spec is a few KiB: these bound what a careless or hostile document can cost (a
# few aliases can make a small YAML document expand exponentially), as the CLI's do.
_MAX_SPEC_BYTES = 1 << 20
_MAX_JSON_BYTES = 4 << 20
_MAX_DEPTH = 64

# The spec fields that name files, as field paths of JobSpec: made absolute against the
# caller's directory, as the CLI does (the coordinator takes absolute paths only). The
# same fields as common/path_policy.cc's ForEachPathField.
_PATH_FIELDS = (("data", "safetensors_path"), ("data", "tokens", "train_path"),
                ("data", "tokens", "val_path"), ("data", "tokens", "tokenizer"),
                ("init", "safetensors_path"), ("init", "checkpoint_dir"),
                ("init", "huggingface", "dir"), ("output", "final_model_path"),
                ("output", "huggingface_dir"), ("output", "checkpoint_dir"))

# A plain YAML scalar that the CLI reads as a number (AsJsonNumber): decimal digits with
# an optional sign, point and exponent ("007", ".5", "1.", "+10"), nothing of YAML 1.1's
# octal, sexagesimal or underscores.
_NUMBER = re.compile(r"[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")
# The plain scalars yaml-cpp reads as null (its IsNullString).
_NULLS = ("", "~", "null", "Null", "NULL")
# The words protobuf's C++ JSON parser, which the CLI uses, reads as a bool when a bool
# field holds a string (its safe_strtob, any case): "yes" and "n" are a bool there,
# while ParseDict takes only true and false.
_TRUE_WORDS = ("true", "t", "yes", "y", "1")
_FALSE_WORDS = ("false", "f", "no", "n", "0")
# The tag _Composer gives an untagged plain scalar: the only kind that may be typed.
_PLAIN = "tag:shardwise,2024:plain"


def _invalid(message):
    return ShardwiseError("INVALID_ARGUMENT", message)


class _Composer(yaml.SafeLoader):
    """Composes a document into nodes, which _SpecReader types as the CLI does; every
    untagged plain scalar is tagged _PLAIN, the rest keep their own tags."""

    def resolve(self, kind, value, implicit):
        if kind is yaml.ScalarNode and implicit[0]:
            return _PLAIN
        return super().resolve(kind, value, implicit)


def _field_key(key):
    """The protobuf field a key names: lowerCamelCase and snake_case name the same one."""
    return re.sub(r"[A-Z]", lambda upper: "_" + upper.group(0).lower(), key)


def _scalar(node):
    """A scalar typed as the CLI types it, not as YAML 1.1 does: a plain one is a bool only
    as true or false, null as _NULLS, a number as _NUMBER (so 0042 is 42, not octal),
    else a string (yes, on and dates too); a quoted or tagged one is always a string."""
    value = node.value
    if node.tag != _PLAIN:
        return value
    if value in ("true", "false"):
        return value == "true"
    if value in _NULLS:
        return None
    if _NUMBER.fullmatch(value):
        return float(value) if any(c in value for c in ".eE") else int(value)
    return value


class _SpecReader:
    """A composed document as a dict, as YamlToJson makes JSON of one: refuses a key given
    twice in a mapping (in either spelling), nesting deeper than _MAX_DEPTH and a
    document that expands past _MAX_JSON_BYTES, counted as it is walked so that an
    expanding one stops early."""

    def __init__(self):
        self._budget = _MAX_JSON_BYTES

    def value(self, node, depth):
        if depth > _MAX_DEPTH:
            raise _invalid(f"job spec line {node.start_mark.line + 1}: nested deeper than "
                           f"{_MAX_DEPTH} levels")
        if self._budget < 0:
            raise _invalid(f"job spec expands to more than {_MAX_JSON_BYTES >> 20} MiB "
                           "(aliases repeated?)")
        if isinstance(node, yaml.ScalarNode):
            self._budget -= len(node.value) + 2
            return _scalar(node)
        self._budget -= 2
        if isinstance(node, yaml.SequenceNode):
            return [self.value(item, depth + 1) for item in node.value]
        return self._mapping(node, depth)

    def _mapping(self, node, depth):
        mapping, fields = {}, set()
        for key_node, value_node in node.value:
            line = key_node.start_mark.line + 1
            if not isinstance(key_node, yaml.ScalarNode):
                raise _invalid(f"job spec line {line}: a mapping key must be a plain name")
            key = key_node.value
            if _field_key(key) in fields:
                raise _invalid(f"job spec line {line}: field '{key}' is given twice in the same "
                               "mapping")
            fields.add(_field_key(key))
            self._budget -= len(key) + 3
            mapping[key] = self.value(value_node, depth + 1)
        return mapping


def _parse(text):
    """The spec in YAML or JSON `text`, as the CLI's ParseJobSpec reads it."""
    try:
        root = yaml.compose(text, Loader=_Composer)  # nosec: composes nodes, builds no object
    except yaml.YAMLError as error:
        raise _invalid(f"job spec is not valid YAML or JSON: {error}") from None
    except RecursionError:
        raise _invalid(f"job spec nested deeper than {_MAX_DEPTH} levels") from None
    if not isinstance(root, yaml.MappingNode):
        raise _invalid("job spec must be a mapping of fields (see docs/job-spec.md)")
    return _SpecReader().value(root, 0)


def _read_file(path):
    """The spec in the file at `path`, read as the CLI's ReadJobSpecFile reads one: a
    regular file (a FIFO would block) of at most _MAX_SPEC_BYTES; an error says which
    file."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise ShardwiseError("NOT_FOUND",
                             f"cannot read job spec file '{path}': no such file") from None
    except OSError as error:
        raise ShardwiseError("NOT_FOUND", f"cannot read job spec file '{path}': "
                             f"{error.strerror}") from None
    if not stat.S_ISREG(info.st_mode):
        raise ShardwiseError("NOT_FOUND",
                             f"cannot read job spec file '{path}': not a regular file")
    if info.st_size > _MAX_SPEC_BYTES:
        raise _invalid(f"{path}: job spec is {info.st_size} bytes; at most {_MAX_SPEC_BYTES} "
                       "are allowed")
    try:
        with open(path, "rb") as file:
            text = file.read(_MAX_SPEC_BYTES + 1).decode("utf-8")
        return _parse(text)
    except OSError as error:
        raise ShardwiseError("NOT_FOUND", f"cannot read job spec file '{path}': "
                             f"{error.strerror}") from None
    except UnicodeDecodeError as error:
        raise _invalid(f"{path}: job spec is not valid YAML or JSON: {error}") from None
    except ShardwiseError as error:
        raise ShardwiseError(error.code, f"{path}: {error.message}") from None


def _check_spellings(value, depth=0):
    """Refuses a dict that names a field twice in one mapping (train_path and trainPath),
    which protobuf's ParseDict would take as the last one it meets."""
    if depth > _MAX_DEPTH:
        raise _invalid(f"job spec nested deeper than {_MAX_DEPTH} levels")
    if isinstance(value, list):
        for item in value:
            _check_spellings(item, depth + 1)
    if not isinstance(value, dict):
        return
    fields = {}
    for key, item in value.items():
        if isinstance(key, str):
            if _field_key(key) in fields:
                raise _invalid(f"job spec: field '{key}' is given twice in the same mapping "
                               f"(as '{fields[_field_key(key)]}')")
            fields[_field_key(key)] = key
        _check_spellings(item, depth + 1)


def _word_bool(word):
    """The bool the CLI reads `word` as, or `word` itself (for ParseDict to refuse)."""
    if word.lower() in _TRUE_WORDS:
        return True
    return False if word.lower() in _FALSE_WORDS else word


def _bools_as_the_cli_reads_them(value, descriptor):
    """A copy of `value` (the JSON form of a `descriptor` message) whose bool fields given
    as strings hold the bools the CLI reads them as."""
    if not isinstance(value, dict):
        return value
    fields = {}
    for field in descriptor.fields:
        fields[field.name] = fields[field.json_name] = field
    typed = {}
    for key, item in value.items():
        field = fields.get(key)
        if field is None:
            typed[key] = item
        elif field.label == field.LABEL_REPEATED and isinstance(item, list):
            typed[key] = [_field_value(element, field) for element in item]
        else:
            typed[key] = _field_value(item, field)
    return typed


def _field_value(item, field):
    """One value of `field` as the CLI reads it (see _bools_as_the_cli_reads_them)."""
    if field.type == field.TYPE_BOOL and isinstance(item, str):
        return _word_bool(item)
    if field.message_type is not None:
        return _bools_as_the_cli_reads_them(item, field.message_type)
    return item


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


def spec_message(spec):
    """A JobSpec from a dict (the spec's JSON form, snake_case or lowerCamelCase field
    names), a YAML/JSON file's path or a JobSpec, its relative paths made absolute; the
    caller's dict or message is left as it was."""
    if isinstance(spec, job_spec_pb2.JobSpec):
        copy = job_spec_pb2.JobSpec()
        copy.CopyFrom(spec)
        return _absolute_paths(copy, os.getcwd())
    prefix = ""
    if isinstance(spec, (str, os.PathLike)):
        prefix = f"{os.fspath(spec)}: "
        spec = _read_file(os.fspath(spec))
    elif not isinstance(spec, dict):
        raise _invalid("job spec must be a mapping of fields (see docs/job-spec.md)")
    else:
        _check_spellings(spec)
    spec = _bools_as_the_cli_reads_them(spec, job_spec_pb2.JobSpec.DESCRIPTOR)
    try:
        message = json_format.ParseDict(spec, job_spec_pb2.JobSpec())
    except json_format.ParseError as error:
        raise _invalid(f"{prefix}job spec: {error}") from None
    return _absolute_paths(message, os.getcwd())
