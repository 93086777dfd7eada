"""A TourOps webhook receiver in Python: http.server and the verifier package (sdk/python).

    pip install ./sdk/python                       (from a clone; [ed25519] adds cryptography for v1a)
    TOUROPS_SIGNING_KEYS=whsec_... python3 receiver.py   (PORT, default 4242; POST /webhooks)
    TOUROPS_PUBLIC_KEYS=whpk_... python3 receiver.py     (asymmetricSignatures: v1a, Ed25519)

In any other framework, call verify(raw_body, headers, keys) the same way: raw_body is the bytes
received, before any JSON parsing; keys the subscription's key, or both keys for the 24 hours
after a rotation. A delivery to refuse raises a WebhookVerificationError naming the check.
"""
import os
from http.server import BaseHTTPRequestHandler, HTTPServer

from tourops_webhooks import WebhookVerificationError, verify

KEYS = [
    key
    for name in ("TOUROPS_SIGNING_KEYS", "TOUROPS_PUBLIC_KEYS")
    for key in os.environ.get(name, "").split(",")
    if key
]


class Receiver(BaseHTTPRequestHandler):
    def do_POST(self):
        raw_body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        try:
            event = verify(raw_body, self.headers, KEYS)
        except WebhookVerificationError as error:
            print(f"refused: {type(error).__name__}: {error}", flush=True)
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
    server = HTTPServer(("127.0.0.1", port), Receiver)
    print(f"listening on http://localhost:{port}/webhooks", flush=True)
    server.serve_forever()
