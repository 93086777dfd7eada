"""A TourOps webhook receiver in Python, standard library only: listens, verifies, acknowledges.

    TOUROPS_SIGNING_KEYS=whsec_... python3 receiver.py     (PORT, default 4242; POST /webhooks)
    TOUROPS_PUBLIC_KEYS=whpk_... python3 receiver.py       (asymmetricSignatures: v1a, Ed25519)

verify(raw_body, signature_header, signing_keys) works in any framework: raw_body is the bytes
received, before any JSON parsing; signing_keys the subscription's key, or both keys for the 24
hours after a rotation. It raises ValueError on a delivery to refuse (answer it with a 400).
verify_v1a(raw_body, headers, public_keys) checks the Ed25519 signature instead, with the
subscription's publicKey (the `cryptography` package: pip install cryptography, or Debian's
python3-cryptography); whoever holds a public key cannot sign.
"""
import base64
import hashlib
import hmac
import json
import os
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

TOLERANCE_SECONDS = 300


def verify(raw_body, signature_header, signing_keys, tolerance=TOLERANCE_SECONDS, now=None):
    timestamp, candidates = None, []
    for part in (signature_header or "").split(","):
        name, _, value = part.partition("=")
        if name == "t" and value.isdigit():
            timestamp = int(value)
        elif name == "v1":
            candidates.append(value)
    if timestamp is None or not candidates:
        raise ValueError("no t or no v1")
    if abs((time.time() if now is None else now) - timestamp) > tolerance:
        raise ValueError("t is too far from now")
    signed = str(timestamp).encode() + b"." + raw_body
    expected = [hmac.new(key.encode(), signed, hashlib.sha256).hexdigest() for key in signing_keys]
    if not any(hmac.compare_digest(e, c) for e in expected for c in candidates):
        raise ValueError("no signature matches the signing keys")
    return json.loads(raw_body)


def verify_v1a(raw_body, headers, public_keys, tolerance=TOLERANCE_SECONDS, now=None):
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    message_id, stamp = headers.get("webhook-id"), headers.get("webhook-timestamp") or ""
    if not message_id or not stamp.isdigit():
        raise ValueError("webhook-id or webhook-timestamp missing")
    if abs((time.time() if now is None else now) - int(stamp)) > tolerance:
        raise ValueError("webhook-timestamp is too far from now")
    signed = f"{message_id}.{stamp}.".encode() + raw_body
    signatures = [
        base64.b64decode(part[4:])
        for part in (headers.get("webhook-signature") or "").split(" ")
        if part.startswith("v1a,")
    ]
    for key in public_keys:
        public_key = Ed25519PublicKey.from_public_bytes(base64.b64decode(key.removeprefix("whpk_")))
        for signature in signatures:
            try:
                public_key.verify(signature, signed)
                return json.loads(raw_body)
            except InvalidSignature:
                pass
    raise ValueError("no v1a signature matches the public keys")


class Receiver(BaseHTTPRequestHandler):
    signing_keys = [k for k in os.environ.get("TOUROPS_SIGNING_KEYS", "").split(",") if k]
    public_keys = [k for k in os.environ.get("TOUROPS_PUBLIC_KEYS", "").split(",") if k]

    def do_POST(self):
        raw_body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        try:
            if self.public_keys:
                event = verify_v1a(raw_body, self.headers, self.public_keys)
            else:
                event = verify(raw_body, self.headers.get("Service-Signature"), self.signing_keys)
        except ValueError as error:
            print(f"refused: {error}", flush=True)
            self.send_response(400)
            self.end_headers()
            return
        # Acknowledge at once; do the work after (deduplicate on event["id"]: deliveries can repeat).
        self.send_response(204)
        self.end_headers()
        print(f"verified {event['type']} {event['id']}", flush=True)

    def log_message(self, *args):
        pass


if __name__ == "__main__":
    port = int(os.environ.get("PORT", "4242"))
    print(f"listening on http://localhost:{port}/webhooks", flush=True)
    HTTPServer(("127.0.0.1", port), Receiver).serve_forever()
