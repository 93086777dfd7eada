"""Verify a TourOps webhook delivery with the Python standard library only.

    event = verify(raw_body, request.headers["Service-Signature"], ["whsec_..."])

raw_body: the bytes received, before any JSON parsing. signing_keys: the subscription's key, or
both keys for the 24 hours after a rotation. Raises ValueError on a delivery to refuse (answer it
with a 400); deduplicate accepted events on event["id"].
"""
import hashlib
import hmac
import json
import sys
import time

TOLERANCE_SECONDS = 300


def verify(raw_body, signature_header, signing_keys, tolerance=TOLERANCE_SECONDS, now=None):
    timestamp, candidates = None, []
    for part in signature_header.split(","):
        name, _, value = part.partition("=")
        if name == "t" and value.isdigit():
            timestamp = int(value)
        elif name == "v1":
            candidates.append(value)
    if timestamp is None or not candidates:
        raise ValueError("Service-Signature has no t or no v1")
    if abs((time.time() if now is None else now) - timestamp) > tolerance:
        raise ValueError("t is too far from now")
    signed = str(timestamp).encode() + b"." + raw_body
    expected = [hmac.new(key.encode(), signed, hashlib.sha256).hexdigest() for key in signing_keys]
    if not any(hmac.compare_digest(e, c) for e in expected for c in candidates):
        raise ValueError("no signature matches the signing keys")
    return json.loads(raw_body)


if __name__ == "__main__":
    # python3 verify_webhook.py "<Service-Signature>" whsec_key [whsec_other] < body.json
    try:
        event = verify(sys.stdin.buffer.read(), sys.argv[1], sys.argv[2:])
    except ValueError as error:
        print(f"refused: {error}", file=sys.stderr)
        sys.exit(1)
    print(event["type"], event["id"])
