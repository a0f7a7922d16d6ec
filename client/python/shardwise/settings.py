"""Where and how a Client connects (the coordinator's address, the CA that makes the
channel TLS, the bearer token), taken from the caller or else the environment and checked
as the CLI checks them (common/coordinator_address.cc, common/channel_credentials.cc,
client/cli.cc's ClientOptionsFromFlags), before any connection is made."""

import ipaddress
import os
import re
import ssl

from shardwise import arguments
from shardwise.errors import ShardwiseError

DEFAULT_ADDRESS = "127.0.0.1:7070"
_ADDRESS_VARIABLE = "SHARDWISE_COORDINATOR"
_CA_VARIABLE = "SHARDWISE_TLS_CA"
_TOKEN_VARIABLE = "SHARDWISE_TOKEN"
# gRPC's target schemes, whose addresses gRPC checks itself.
_SCHEMES = ("dns:", "ipv4:", "ipv6:", "unix:", "unix-abstract:", "vsock:")
_SHOWN_CHARACTERS = 200
_MAX_CA_BYTES = 1 << 20
_MAX_TOKEN_FILE_BYTES = 64 << 10
# What the CLI strips around a token (absl::StripAsciiWhitespace); str.strip() would also
# take a no-break space, which the CLI keeps and refuses.
_ASCII_WHITESPACE = " \t\n\v\f\r"
_PEM_CERTIFICATE = re.compile(rb"-----BEGIN CERTIFICATE-----.*?-----END CERTIFICATE-----", re.S)


def _shown(value):
    """`value` as a message may echo it: unprintable characters escaped, cut if long."""
    shown = "".join(c if c.isprintable() else repr(c)[1:-1] for c in value[:_SHOWN_CHARACTERS])
    return shown if len(value) <= _SHOWN_CHARACTERS else f"{shown}... ({len(value)} characters)"


def check_address(source, address):
    """Refuses (INVALID_ARGUMENT naming `source`) what is neither HOST:PORT, with a port
    from 1 to 65535 and an IPv6 host in brackets, nor a gRPC target with a scheme: gRPC
    would read port 99999 modulo 65536 and an address without a port as port 0, another
    server or none, with an error naming neither."""

    def refuse(why):
        return ShardwiseError("INVALID_ARGUMENT",
                              f"{source}: '{_shown(address)}' {why} (expected HOST:PORT)")

    if not isinstance(address, str):
        raise ShardwiseError("INVALID_ARGUMENT", f"{source}: {type(address).__name__} is not a "
                             "str (expected HOST:PORT)")
    if not address:
        raise refuse("is empty")
    if address.startswith(_SCHEMES):
        return
    host, colon, port = address.rpartition(":")
    if not colon:
        raise refuse("has no port")
    if not host:
        raise refuse("has no host")
    bracketed = host.startswith("[")
    if bracketed != host.endswith("]") or (not bracketed and ":" in host):
        raise refuse("is not HOST:PORT (an IPv6 address goes in brackets: [::1]:7070)")
    if any(c.isspace() or not c.isprintable() for c in host):
        raise refuse("has a space or control character in its host")
    if not (port.isascii() and port.isdigit() and len(port) <= 5 and 1 <= int(port) <= 65535):
        raise refuse(f"has port '{_shown(port)}', not one from 1 to 65535")


def resolve_address(address):
    """`address` if given, else $SHARDWISE_COORDINATOR if set and not empty, else
    DEFAULT_ADDRESS; checked, naming whichever gave it."""
    if address is not None:
        check_address("address", address)
        return address
    address = os.environ.get(_ADDRESS_VARIABLE)
    if not address:
        return DEFAULT_ADDRESS
    check_address(f"${_ADDRESS_VARIABLE}", address)
    return address


def resolve_tls_ca(tls_ca):
    """The CA file that makes the channel TLS and where it came from (for errors), as
    (path, source): `tls_ca` if given ("" for plaintext, over $SHARDWISE_TLS_CA), else
    $SHARDWISE_TLS_CA; (None, None) for plaintext."""
    if tls_ca is not None:
        return (arguments.path(tls_ca, "tls_ca") or None), "tls_ca"
    tls_ca = os.environ.get(_CA_VARIABLE)
    return (tls_ca or None), f"${_CA_VARIABLE}"


def _read_bounded(path, source, most, why, folder):
    """The bytes of the file `path`, refused naming `source` when it cannot be read, is a
    folder (`folder` says what it should be) or holds more than `most` bytes (`why`): a
    device (/dev/zero) or a pipe that never ends is not read until memory runs out."""
    try:
        with open(path, "rb") as file:
            data = file.read(most + 1)
    except IsADirectoryError:
        raise ShardwiseError("INVALID_ARGUMENT", f"{source}: '{_shown(path)}' {folder}") from None
    except (OSError, ValueError) as error:
        why = error.strerror if isinstance(error, OSError) else str(error)
        raise ShardwiseError("INVALID_ARGUMENT",
                             f"{source}: cannot read '{_shown(path)}': {why}") from None
    if len(data) > most:
        raise ShardwiseError("INVALID_ARGUMENT",
                             f"{source}: '{_shown(path)}' holds more than {most} bytes ({why})")
    return data


def read_tls_ca(path, source):
    """The CA certificates of `path`, refused as the CLI refuses them when the file cannot
    be read or holds no PEM certificate that parses (every handshake would fail later,
    told as a coordinator not reached). OpenSSL parses them (the ssl module's), as the
    CLI's check does."""
    certificates = _read_bounded(path, source, _MAX_CA_BYTES, "a CA file is a few certificates",
                                 "is a folder, not a CA certificate file (PEM)")
    blocks = _PEM_CERTIFICATE.findall(certificates)
    if not blocks:
        raise ShardwiseError("INVALID_ARGUMENT",
                             f"{source}: '{_shown(path)}' holds no PEM certificate")
    try:
        ssl.create_default_context(cadata=b"\n".join(blocks).decode("ascii"))
    except (ssl.SSLError, UnicodeDecodeError, ValueError):
        raise ShardwiseError("INVALID_ARGUMENT", f"{source}: '{_shown(path)}' holds a PEM "
                             "certificate that does not parse") from None
    return certificates


def read_token_file(path):
    """The token in the file `path`, read as the CLI reads its --token_file
    (common/channel_credentials.cc, ReadBearerToken): up to 64 KiB, surrounding
    whitespace dropped."""
    data = _read_bounded(path, "token_file", _MAX_TOKEN_FILE_BYTES, "a token is one line",
                         "is a folder, not a token file")
    token = data.decode("latin-1").strip(_ASCII_WHITESPACE)
    if not token:
        raise ShardwiseError("INVALID_ARGUMENT",
                             f"token_file: cannot read a token from '{_shown(path)}'")
    return token


def resolve_token(token, token_file=None):
    """The bearer token: `token` if given ("" for none, over $SHARDWISE_TOKEN), else
    $SHARDWISE_TOKEN; stripped of surrounding whitespace as the CLI strips it, None when
    nothing is left. Refused when it holds a character a gRPC header cannot carry
    (gRPC would fail every call with a ValueError); the message never shows the token."""
    source = "token"
    if token_file is not None:
        if token is not None:
            raise ShardwiseError("INVALID_ARGUMENT", "give token or token_file, not both")
        token_file = arguments.path(token_file, "token_file")
        source, token = f"token_file '{_shown(token_file)}'", read_token_file(token_file)
    elif token is None:
        source, token = f"${_TOKEN_VARIABLE}", os.environ.get(_TOKEN_VARIABLE, "")
    if not isinstance(token, str):
        raise ShardwiseError("INVALID_ARGUMENT", f"{source}: {type(token).__name__} is not a str")
    token = token.strip(_ASCII_WHITESPACE)
    if not token:
        return None
    if not all("!" <= c <= "~" for c in token):
        raise ShardwiseError("INVALID_ARGUMENT", f"{source}: the token holds a space, a control "
                             "or a non-ASCII character (a token is printable ASCII)")
    return token


def is_loopback(address):
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


def check_token_transport(address, tls_ca, token):
    """Refuses a token that would go in plaintext past this machine."""
    if token and not tls_ca and not is_loopback(address):
        raise ShardwiseError(
            "FAILED_PRECONDITION",
            f"refusing to send a token in plaintext to {address}: anyone on the way could "
            "read it. Give the CA of the coordinator's certificate (tls_ca, or "
            "$SHARDWISE_TLS_CA)")
