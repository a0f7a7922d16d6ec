"""The caller's arguments checked before a call, refused as the coordinator refuses a
bad field (ShardwiseError INVALID_ARGUMENT naming the argument and the value) rather than
with the TypeError or ValueError protobuf would raise, or a wrong request it would build
(a string where a list of states is due would be read letter by letter)."""

import reprlib

from shardwise.errors import invalid_argument

_SHOWN = reprlib.Repr()
_SHOWN.maxstring = _SHOWN.maxother = 80


def _refuse(name, expected, value):
    return invalid_argument(
        f"{name}: expected {expected}, got {type(value).__name__} {_SHOWN.repr(value)}")


def text(value, name):
    """`value`, a str."""
    if not isinstance(value, str):
        raise _refuse(name, "a string", value)
    return value


def optional_text(value, name):
    """`value`, a str or None."""
    return None if value is None else text(value, name)


def integer(value, name, bits=64):
    """`value`, an int that fits a signed field of `bits` bits (a bool is refused: Python
    counts it as 1 or 0; protobuf raises ValueError past the field's range)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise _refuse(name, "an integer", value)
    if not -(1 << (bits - 1)) <= value < (1 << (bits - 1)):
        raise invalid_argument(f"{name}: {value} does not fit a {bits}-bit integer")
    return value


def optional_integer(value, name):
    """`value`, an int or None."""
    return None if value is None else integer(value, name)


def names(values, name):
    """`values` as a list: a lone name or number as a list of one."""
    if isinstance(values, (str, int)):
        return [values]
    try:
        return list(values)
    except TypeError:
        raise _refuse(name, "a name or a list of names", values) from None
