"""A job spec's YAML or JSON text read as the CLI reads it (contracts/job_spec_io.cc's
ParseJobSpec and ReadJobSpecFile, node for node): the spec's JSON form as a dict, or
ShardwiseError naming the file, the line and what is wrong, in the CLI's words."""

import os
import re
import stat

import yaml

from shardwise.errors import ShardwiseError, invalid_argument

# A job spec is a few KiB: these bound what a careless or hostile document can cost (a
# few aliases can make a small YAML document expand exponentially), as the CLI's do.
_MAX_SPEC_BYTES = 1 << 20
_MAX_JSON_BYTES = 4 << 20
_MAX_DEPTH = 64
# Wider than any field's integers (int64's are 19 digits; a sign and leading zeros are
# allowed), within what Python's int() reads.
_MAX_INTEGER_CHARACTERS = 1000

# A plain YAML scalar that the CLI reads as a number (AsJsonNumber): decimal digits with
# an optional sign, point and exponent ("007", ".5", "1.", "+10"), nothing of YAML 1.1's
# octal, sexagesimal or underscores.
NUMBER = re.compile(r"[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")
# The plain scalars yaml-cpp reads as null (its IsNullString).
_NULLS = ("", "~", "null", "Null", "NULL")
# The tag _Composer gives an untagged plain scalar: the only kind that may be typed.
_PLAIN = "tag:shardwise,2024:plain"


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
    as true or false, null as _NULLS, a number as NUMBER (so 0042 is 42, not octal),
    else a string (yes, on and dates too); a quoted or tagged one is always a string."""
    value = node.value
    if node.tag != _PLAIN:
        return value
    if value in ("true", "false"):
        return value == "true"
    if value in _NULLS:
        return None
    if NUMBER.fullmatch(value):
        if any(c in value for c in ".eE"):
            return float(value)
        if len(value) > _MAX_INTEGER_CHARACTERS:  # Python's int() refuses past 4300 digits
            raise invalid_argument(f"job spec line {node.start_mark.line + 1}: the integer "
                                   f"{value[:20]}... has {len(value)} digits; no field holds it")
        return int(value)
    return value


class _SpecReader:
    """A composed document as a dict, as YamlToJson makes JSON of one: refuses a key given
    twice in a mapping (in either spelling), nesting deeper than _MAX_DEPTH and a
    document that expands past _MAX_JSON_BYTES, counted as it is walked so that an
    expanding one stops early."""

    def __init__(self):
        self._budget = _MAX_JSON_BYTES

    def value(self, node, depth):
        if depth >= _MAX_DEPTH:  # the root is level 1, at depth 0, as YamlToJson counts
            raise invalid_argument(f"job spec line {node.start_mark.line + 1}: nested deeper than "
                                   f"{_MAX_DEPTH} levels")
        if self._budget < 0:
            raise invalid_argument(f"job spec expands to more than {_MAX_JSON_BYTES >> 20} MiB "
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
                raise invalid_argument(f"job spec line {line}: a mapping key must be a plain name")
            key = key_node.value
            if _field_key(key) in fields:
                raise invalid_argument(
                    f"job spec line {line}: field '{key}' is given twice in the same mapping")
            fields.add(_field_key(key))
            self._budget -= len(key) + 3
            mapping[key] = self.value(value_node, depth + 1)
        return mapping


def parse(text):
    """The spec in YAML or JSON `text`, as the CLI's ParseJobSpec reads it."""
    try:
        documents = list(yaml.compose_all(text, Loader=_Composer))  # nosec: nodes, no objects
    except yaml.YAMLError as error:
        raise invalid_argument(f"job spec is not valid YAML or JSON: {error}") from None
    except RecursionError:
        raise invalid_argument(f"job spec nested deeper than {_MAX_DEPTH} levels") from None
    if len(documents) > 1:
        raise invalid_argument("job spec holds more than one YAML document (separated by ---); "
                               "a spec is one")
    root = documents[0] if documents else None
    if not isinstance(root, yaml.MappingNode):
        raise invalid_argument("job spec must be a mapping of fields (see docs/job-spec.md)")
    return _SpecReader().value(root, 0)


def read_file(path):
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
    except ValueError:  # a NUL in the path
        raise invalid_argument(f"job spec file {path!r}: a path holds no NUL character") from None
    if not stat.S_ISREG(info.st_mode):
        raise ShardwiseError("NOT_FOUND",
                             f"cannot read job spec file '{path}': not a regular file")
    if info.st_size > _MAX_SPEC_BYTES:
        raise invalid_argument(f"{path}: job spec is {info.st_size} bytes; at most "
                               f"{_MAX_SPEC_BYTES} are allowed")
    try:
        with open(path, "rb") as file:
            text = file.read(_MAX_SPEC_BYTES + 1).decode("utf-8")
        return parse(text)
    except OSError as error:
        raise ShardwiseError("NOT_FOUND", f"cannot read job spec file '{path}': "
                             f"{error.strerror}") from None
    except UnicodeDecodeError as error:
        raise invalid_argument(f"{path}: job spec is not valid YAML or JSON: {error}") from None
    except ShardwiseError as error:
        raise ShardwiseError(error.code, f"{path}: {error.message}") from None
