"""The caller's arguments checked before a call, refused as the coordinator refuses a
bad field (ShardwiseError INVALID_ARGUMENT naming the argument and the value) rather than
with the TypeError or ValueError protobuf would raise, or a wrong request it would build
(a string where a list of states is due would be read letter by letter)."""

import operator
import os
import reprlib

from shardwise.errors import invalid_argument

_SHOWN = reprlib.Repr()
_SHOWN.maxstring = _SHOWN.maxother = 80


def _refuse(name, expected, value):
    return invalid_argument(
        f"{name}: expected {expected}, got {type(value).__name__} {_SHOWN.repr(value)}")


def shown(value):
    """`value` as a message echoes it: its repr, cut past 80 characters."""
    return _SHOWN.repr(value)


def text(value, name):
    """`value`, a str that UTF-8 can carry (not one with a lone surrogate, as
    os.fsdecode makes of a name that is not UTF-8: protobuf would raise
    UnicodeEncodeError)."""
    if not isinstance(value, str):
        raise _refuse(name, "a string", value)
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise invalid_argument(f"{name}: {_SHOWN.repr(value)} is not text UTF-8 can carry "
                               "(it holds a lone surrogate)") from None
    return value


def optional_text(value, name):
    """`value`, a str or None."""
    return None if value is None else text(value, name)


def is_integer(value):
    """Whether `value` is an integer: an int, or what stands for one (numpy's int64, as
    a notebook's arithmetic gives), but not a bool, which Python counts as 1 or 0."""
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        return False
    try:
        operator.index(value)
    except TypeError:
        return False
    return True


def integer(value, name, bits=64):
    """`value` as an int that fits a signed field of `bits` bits (a bool is refused;
    protobuf raises ValueError past the field's range)."""
    if not is_integer(value):
        raise _refuse(name, "an integer", value)
    value = operator.index(value)
    if not -(1 << (bits - 1)) <= value < (1 << (bits - 1)):
        raise invalid_argument(f"{name}: {value} does not fit a {bits}-bit integer")
    return value


def optional_seconds(value, name):
    """`value` as a float of seconds, above 0 and finite; None stays None."""
    if value is None:
        return None
    if not isinstance(value, float) and not is_integer(value):  # is_integer refuses a bool
        raise _refuse(name, "a number of seconds", value)
    try:
        seconds = float(value)
    except OverflowError:  # an int past a float's range
        seconds = float("inf")
    if not 0 < seconds < float("inf"):
        raise invalid_argument(f"{name}: {_SHOWN.repr(value)} seconds is not above 0 and finite")
    return seconds


def optional_integer(value, name):
    """`value`, an int or None."""
    return None if value is None else integer(value, name)


def path(value, name):
    """`value` as a str path: a str or an os.PathLike (pathlib.Path) of one, without a
    NUL (a name that is not UTF-8 is one too, as os.fsdecode gives it). An int would be
    opened as a file descriptor, and closed after."""
    if not isinstance(value, (str, os.PathLike)):
        raise _refuse(name, "a path", value)
    value = os.fspath(value)
    if not isinstance(value, str):
        raise _refuse(name, "a path", value)
    if "\0" in value:
        raise invalid_argument(f"{name}: {_SHOWN.repr(value)} holds a NUL character")
    return value


def names(values, name):
    """`values` as a list: a lone name or number as a list of one."""
    if isinstance(values, str) or is_integer(values):
        return [values]
    try:
        return list(values)
    except TypeError:
        raise _refuse(name, "a name or a list of names", values) from None
