"""The spec's JSON form (a dict) made to read, through protobuf's Python parser
(ParseDict), as protobuf's C++ parser, the CLI's and the coordinator's, reads it: where
the two parsers differ, the C++ one is followed."""

import re

from google.protobuf.descriptor import FieldDescriptor

from shardwise.errors import invalid_argument
from shardwise.spec_yaml import NUMBER

# A string in a bool field: these words, in
# any case (its safe_strtob: "yes" and "n" are bools there, ParseDict takes only true and
# false). In a number field: the decimal text below (hex for a float, and JSON's NaN and
# Infinity), where ParseDict would take whatever Python's int() and float() take.
_TRUE_WORDS = ("true", "t", "yes", "y", "1")
_FALSE_WORDS = ("false", "f", "no", "n", "0")
_INTEGER_TEXT = re.compile(r"[-+]?[0-9]+")
_HEX_FLOAT_TEXT = re.compile(
    r"[-+]?0[xX](?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)(?:[pP][-+]?[0-9]+)?")
_FLOAT_WORDS = ("NaN", "Infinity", "-Infinity")
_INTEGER_TYPES = (FieldDescriptor.CPPTYPE_INT32, FieldDescriptor.CPPTYPE_INT64,
                  FieldDescriptor.CPPTYPE_UINT32, FieldDescriptor.CPPTYPE_UINT64)
_FLOAT_TYPES = (FieldDescriptor.CPPTYPE_FLOAT, FieldDescriptor.CPPTYPE_DOUBLE)
_TYPE_NAMES = {value: name for name, value in vars(FieldDescriptor).items()
               if name.startswith("TYPE_") and isinstance(value, int)}


def _scalar_text(text, field, where):
    """A string given for the scalar `field` at `where`, as protobuf's C++ JSON parser
    reads it: for a bool, the words it takes; for a number, only the text it parses
    (ParseDict would take "1_000", " 5" or "inf" through Python's int() and float()),
    refused with its message otherwise."""
    if field.type == field.TYPE_BOOL:
        if text.lower() in _TRUE_WORDS:
            return True
        if text.lower() in _FALSE_WORDS:
            return False
    elif field.cpp_type in _INTEGER_TYPES:
        if _INTEGER_TEXT.fullmatch(text):
            return text
    elif field.cpp_type in _FLOAT_TYPES:
        if text in _FLOAT_WORDS or NUMBER.fullmatch(text):
            return text
        if _HEX_FLOAT_TEXT.fullmatch(text):
            return float.fromhex(text)
    else:
        return text  # a string, bytes or an enum's name: ParseDict reads it as C++ does
    raise _invalid_value(f'"{text}"', field, where)


def _invalid_value(shown, field, where):
    """The C++ parser's refusal of the value `shown` for `field` at `where`."""
    if field.enum_type is not None:
        type_name = f"type.googleapis.com/{field.enum_type.full_name}"
    else:
        type_name = _TYPE_NAMES.get(field.type, f"TYPE_{field.type}")
    return invalid_argument(f"job spec: ({where}): invalid value {shown} for type {type_name}")


def _field_value(item, field, where):
    """One value of `field` (at `where`) as the CLI reads it."""
    if isinstance(item, str):
        return _scalar_text(item, field, where)
    # A bool is an int to Python: ParseDict reads `lr: true` as 1.0 and `loss: true` as
    # enum value 1, where the C++ parser takes a bool only in a bool field.
    if isinstance(item, bool) and field.type != field.TYPE_BOOL and field.message_type is None:
        raise _invalid_value("true" if item else "false", field, where)
    if field.message_type is not None:
        return as_the_cli_reads_it(item, field.message_type, where)
    return item


def as_the_cli_reads_it(value, descriptor, where):
    """A copy of `value` (the JSON form of a `descriptor` message, at `where`) in which
    protobuf's Python parser, ParseDict, reads what its C++ one, the CLI's and the
    coordinator's, reads: strings in bool and number fields as _scalar_text says, a lone
    value of a repeated field as a list of one and nulls in a list left out (ParseDict
    refuses both), a field named twice (in its two spellings) and a list for a message
    refused (ParseDict takes the last one, and [] as {})."""
    if isinstance(value, list):
        raise invalid_argument(
            f"job spec: {where}: Proto field is not repeating, cannot start list.")
    if not isinstance(value, dict):
        return value
    fields = {}
    for field in descriptor.fields:
        fields[field.name] = fields[field.json_name] = field
    typed, named = {}, {}
    for key, item in value.items():
        field = fields.get(key)
        inner = f"{where}.{key}" if where else key
        # ParseDict would take the last of train_path and trainPath; the CLI refuses both.
        if field is not None and field.name in named:
            raise invalid_argument(f"job spec: field '{key}' is given twice in the same "
                                   f"mapping (as '{named[field.name]}')")
        if field is not None:
            named[field.name] = key
        if field is None or item is None:
            typed[key] = item
        elif field.label == field.LABEL_REPEATED:
            items = item if isinstance(item, list) else [item]
            typed[key] = [_field_value(x, field, inner) for x in items if x is not None]
        else:
            typed[key] = _field_value(item, field, inner)
    return typed
