"""A TourOps webhook receiver in Python, standard library only: listens, verifies, acknowledges.

    TOUROPS_SIGNING_KEYS=whsec_... python3 receiver.py     (PORT, default 4242; POST /webhooks)

verify(raw_body, signature_header, signing_keys) works in any framework: raw_body is the bytes
received, before any JSON parsing; signing_keys the subscription's key, or both keys for the 24
hours after a rotation. It raises ValueError on a delivery to refuse (answer it with a 400).
"""
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


class Receiver(BaseHTTPRequestHandler):
    signing_keys = [k for k in os.environ.get("TOUROPS_SIGNING_KEYS", "").split(",") if k]

    def do_POST(self):
        raw_body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        try:
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
