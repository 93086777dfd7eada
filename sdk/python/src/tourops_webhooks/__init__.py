"""Verify TourOps webhook deliveries before acting on them.

    from tourops_webhooks import verify, WebhookVerificationError

    event = verify(raw_body, headers, ["whsec_..."])   # raises WebhookVerificationError

Every way the service signs is checked: ``Service-Signature`` (``t=<unix seconds>,v1=<hex>``, one
``v1`` per live key during a rotation), Standard Webhooks ``webhook-signature`` with ``v1`` (HMAC,
the same ``whsec_`` key) and ``v1a`` (Ed25519, verified with the subscription's ``whpk_`` public
key; needs the ``cryptography`` package). The body must be the bytes received: one parsed and
serialised again no longer matches its signature, and is refused with ``BodyNotRaw``.
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import re
import time
from typing import Any, Iterable, List, Mapping, Optional, Tuple, Union

__all__ = [
    "DEFAULT_TOLERANCE",
    "verify",
    "WebhookVerificationError",
    "InvalidKey",
    "MissingHeader",
    "MalformedHeader",
    "TimestampOutsideTolerance",
    "NoMatchingSignature",
    "BodyNotRaw",
]

#: Largest distance, in seconds and either way, between a delivery's timestamp and now.
DEFAULT_TOLERANCE = 300

SIGNING_KEY_PREFIX = "whsec_"
PUBLIC_KEY_PREFIX = "whpk_"


class WebhookVerificationError(ValueError):
    """A delivery to refuse: answer it with a 400 and do not act on it."""


class InvalidKey(WebhookVerificationError):
    """A key given is neither a signing key (``whsec_``) nor a public key (``whpk_``)."""


class MissingHeader(WebhookVerificationError):
    """The delivery lacks the signature headers the keys given verify."""


class MalformedHeader(WebhookVerificationError):
    """A signature header is there but does not hold what it must (``t``, a ``v1``...)."""


class TimestampOutsideTolerance(WebhookVerificationError):
    """The signed timestamp is further from now than the tolerance: a replay, or a skewed clock."""


class NoMatchingSignature(WebhookVerificationError):
    """No signature of the delivery was made with any of the keys given, over this body."""


class BodyNotRaw(NoMatchingSignature):
    """No signature matches and the body is not as the service sends it: it was parsed and
    serialised again (whitespace, key order or escapes changed). Pass the bytes received."""


Headers = Mapping[str, Any]


def verify(
    body: Union[bytes, bytearray, memoryview, str],
    headers: Headers,
    keys: Union[str, Iterable[str]],
    *,
    tolerance: float = DEFAULT_TOLERANCE,
    now: Optional[float] = None,
) -> dict:
    """Verify one delivery and return its event (the parsed body).

    body: the raw body, as received (a ``str`` is taken as its UTF-8 bytes).
    headers: the request's headers, any mapping (``http.server``'s ``self.headers``, a dict in any
    case, or a WSGI ``environ``).
    keys: the subscription's signing key, or every key of a rotation (``whsec_``), and/or its
    public keys (``whpk_``) to verify ``v1a`` signatures.
    tolerance: seconds allowed between the signed timestamp and ``now`` (Unix seconds).

    Raises a subclass of WebhookVerificationError naming the check that failed.
    """
    raw = _raw(body)
    secrets, public_keys = _split_keys(keys)
    clock = time.time() if now is None else now
    if public_keys:
        try:
            return _verify_v1a(raw, headers, public_keys, tolerance, clock)
        except WebhookVerificationError:
            if not secrets:
                raise
    service_signature = _header(headers, "service-signature")
    if service_signature is not None:
        return _verify_service_signature(raw, service_signature, secrets, tolerance, clock)
    if _header(headers, "webhook-signature") is not None:
        return _verify_v1(raw, headers, secrets, tolerance, clock)
    raise MissingHeader("no Service-Signature or webhook-signature header")


def _raw(body: Any) -> bytes:
    if isinstance(body, str):
        return body.encode("utf-8")
    if isinstance(body, (bytes, bytearray, memoryview)):
        return bytes(body)
    raise TypeError(
        f"the body must be the bytes received, not a parsed {type(body).__name__}: "
        "a signature covers the exact bytes sent"
    )


def _split_keys(keys: Union[str, Iterable[str]]) -> Tuple[List[str], List[bytes]]:
    given = [keys] if isinstance(keys, str) else list(keys)
    if not given:
        raise InvalidKey("no key given: pass the subscription's signing key (whsec_...)")
    secrets: List[str] = []
    public_keys: List[bytes] = []
    for key in given:
        if key.startswith(SIGNING_KEY_PREFIX):
            secrets.append(key)
        elif key.startswith(PUBLIC_KEY_PREFIX):
            raw = _b64decode(key[len(PUBLIC_KEY_PREFIX) :])
            if raw is None or len(raw) != 32:
                raise InvalidKey(f"{key[:9]}... is not a whpk_ key (base64 of 32 bytes)")
            public_keys.append(raw)
        else:
            raise InvalidKey(
                f"a key starting {key[:4]!r} is neither a signing key (whsec_) "
                "nor a public key (whpk_)"
            )
    return secrets, public_keys


def _header(headers: Headers, name: str) -> Optional[str]:
    """The header's value: `name` is lower case; the mapping may use any case, or be a WSGI environ."""
    value = headers.get(name)
    if value is None:
        value = headers.get("HTTP_" + name.upper().replace("-", "_"))
    if value is None:
        for key, candidate in headers.items():
            if isinstance(key, str) and key.lower() == name:
                value = candidate
                break
    if isinstance(value, (list, tuple)):
        value = value[0] if value else None
    if isinstance(value, bytes):
        value = value.decode("latin-1")
    return value


def _b64decode(text: str) -> Optional[bytes]:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None


def _check_timestamp(timestamp: int, tolerance: float, now: float) -> None:
    if abs(now - timestamp) > tolerance:
        raise TimestampOutsideTolerance(
            f"the signed timestamp {timestamp} is {abs(now - timestamp):.0f} s from now, "
            f"more than the tolerance of {tolerance:g} s"
        )


_DIGITS = re.compile(r"[0-9]{1,15}")
_HEX_SIGNATURE = re.compile(r"[0-9a-f]{64}")


def _verify_service_signature(
    raw: bytes, header: str, secrets: List[str], tolerance: float, now: float
) -> dict:
    timestamp: Optional[int] = None
    candidates: List[bytes] = []
    for part in header.split(","):
        name, _, value = part.strip().partition("=")
        if name == "t" and _DIGITS.fullmatch(value):
            timestamp = int(value)
        elif name == "v1" and _HEX_SIGNATURE.fullmatch(value):
            candidates.append(bytes.fromhex(value))
    if timestamp is None or not candidates:
        raise MalformedHeader("Service-Signature has no t= or no v1=")
    _check_timestamp(timestamp, tolerance, now)
    signed = f"{timestamp}.".encode()
    macs = [hmac.new(key.encode(), signed + raw, hashlib.sha256).digest() for key in secrets]
    return _signed_event(raw, macs, candidates, "Service-Signature")


def _standard_headers(
    headers: Headers, version: str, tolerance: float, now: float
) -> Tuple[bytes, List[bytes]]:
    """The signed prefix (``<webhook-id>.<webhook-timestamp>.``) and the signatures of `version`."""
    signature = _header(headers, "webhook-signature")
    message_id = _header(headers, "webhook-id")
    stamp = _header(headers, "webhook-timestamp")
    if signature is None or message_id is None or stamp is None:
        raise MissingHeader(
            "webhook-signature, webhook-id or webhook-timestamp missing "
            "(the subscription must have standardWebhooks on)"
        )
    if not _DIGITS.fullmatch(stamp):
        raise MalformedHeader(f"webhook-timestamp {stamp[:20]!r} is not Unix seconds")
    _check_timestamp(int(stamp), tolerance, now)
    candidates = []
    for part in signature.split(" "):
        if part.startswith(version + ","):
            decoded = _b64decode(part[len(version) + 1 :])
            if decoded is not None:
                candidates.append(decoded)
    if not candidates:
        hint = " (is asymmetricSignatures on?)" if version == "v1a" else ""
        raise MalformedHeader(f"webhook-signature has no {version} signature{hint}")
    return f"{message_id}.{stamp}.".encode(), candidates


def _verify_v1(
    raw: bytes, headers: Headers, secrets: List[str], tolerance: float, now: float
) -> dict:
    signed, candidates = _standard_headers(headers, "v1", tolerance, now)
    macs = []
    for key in secrets:
        # Keys made before the base64 form (43 base64url characters) cannot sign v1: skipped.
        secret = _b64decode(key[len(SIGNING_KEY_PREFIX) :])
        if secret is not None:
            macs.append(hmac.new(secret, signed + raw, hashlib.sha256).digest())
    return _signed_event(raw, macs, candidates, "webhook-signature v1")


def _verify_v1a(
    raw: bytes, headers: Headers, public_keys: List[bytes], tolerance: float, now: float
) -> dict:
    try:
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise ImportError(
            "v1a (Ed25519) signatures need the cryptography package: "
            "pip install 'tourops-webhooks[ed25519]', or Debian's python3-cryptography"
        ) from error
    signed, candidates = _standard_headers(headers, "v1a", tolerance, now)
    message = signed + raw
    matched = False
    for key in public_keys:
        public_key = Ed25519PublicKey.from_public_bytes(key)
        for candidate in candidates:
            try:
                public_key.verify(candidate, message)
                matched = True
            except InvalidSignature:
                pass
    if not matched:
        _refuse(raw, "no v1a signature in webhook-signature matches the public keys")
    return _event(raw)


def _signed_event(raw: bytes, macs: List[bytes], candidates: List[bytes], where: str) -> dict:
    # Every pair is compared, so the time taken does not tell which key or signature matched.
    matched = False
    for mac in macs:
        for candidate in candidates:
            if hmac.compare_digest(mac, candidate):
                matched = True
    if not matched:
        _refuse(raw, f"no signature in {where} matches the signing keys")
    return _event(raw)


def _refuse(raw: bytes, message: str) -> None:
    if _not_as_sent(raw):
        raise BodyNotRaw(
            message + ", and the body is not as the service sends it: it was parsed and "
            "serialised again. Verify the bytes received, before any JSON parsing"
        )
    raise NoMatchingSignature(message)


def _event(raw: bytes) -> dict:
    return json.loads(raw)


_SHORT_ESCAPES = (0x08, 0x09, 0x0A, 0x0C, 0x0D)
_LOWER_HEX = re.compile(rb"[0-9a-f]{4}")


def _not_as_sent(raw: bytes) -> bool:
    """Whether the body cannot be one the service sent: it sends compact JSON that starts with the
    event id, escapes only what JSON requires (lower-case hex), and never writes ``\\/``."""
    if not raw.startswith(b'{"id":"'):
        return True
    in_string = False
    i = 0
    while i < len(raw):
        byte = raw[i]
        if in_string:
            if byte == 0x5C:  # a backslash
                escaped = raw[i + 1 : i + 2]
                if escaped == b"/":
                    return True
                if escaped == b"u":
                    digits = raw[i + 2 : i + 6]
                    if not _LOWER_HEX.fullmatch(digits):
                        return True
                    code = int(digits, 16)
                    if code in _SHORT_ESCAPES or (code >= 0x20 and not 0xD800 <= code <= 0xDFFF):
                        return True
                    i += 6
                    continue
                i += 2
                continue
            if byte == 0x22:
                in_string = False
        elif byte in b" \t\r\n":
            return True
        elif byte == 0x22:
            in_string = True
        i += 1
    return False
