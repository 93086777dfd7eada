"""python3 -m unittest discover -s tests (in sdk/python, with src on PYTHONPATH or the package installed).

SignedHere signs as the service does, with keys made here. RealDeliveries runs the cases a test of
the service captured from real deliveries (TOUROPS_WEBHOOK_CASES, a JSON file: see
test/verifier-packages.test.ts), and is skipped without them.
"""
import base64
import hashlib
import hmac
import json
import os
import unittest

import tourops_webhooks as tw

# Only v1a (Ed25519) needs cryptography, an optional dependency: without it those tests are
# skipped, saying how to get it, and everything else runs.
try:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
except ImportError:
    Ed25519PrivateKey = None
NO_CRYPTOGRAPHY = (
    "v1a needs cryptography, not installed here: pip install 'tourops-webhooks[ed25519]'"
)
needs_cryptography = unittest.skipIf(Ed25519PrivateKey is None, NO_CRYPTOGRAPHY)

NOW = 1_790_000_000
KEY = "whsec_" + base64.b64encode(b"k" * 33).decode()
OLD_KEY = "whsec_" + base64.b64encode(b"o" * 33).decode()
BODY = '{"id":"evt_1","type":"client.created","created":%d,"data":{"name":"Zoë / Ø <&>"}}' % NOW
MESSAGE_ID = "evt_1"


def service_signature(body, keys, timestamp=NOW):
    macs = [
        hmac.new(key.encode(), f"{timestamp}.{body}".encode(), hashlib.sha256).hexdigest()
        for key in keys
    ]
    return ",".join([f"t={timestamp}"] + [f"v1={mac}" for mac in macs])


def standard_headers(body, keys, pairs=(), timestamp=NOW):
    signed = f"{MESSAGE_ID}.{timestamp}.{body}".encode()
    parts = [
        "v1," + base64.b64encode(hmac.new(base64.b64decode(k[6:]), signed, hashlib.sha256).digest()).decode()
        for k in keys
    ] + ["v1a," + base64.b64encode(pair.sign(signed)).decode() for pair in pairs]
    return {
        "webhook-id": MESSAGE_ID,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": " ".join(parts),
    }


def public_key(pair):
    raw = pair.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    return "whpk_" + base64.b64encode(raw).decode()


class SignedHere(unittest.TestCase):
    def test_service_signature_returns_the_event(self):
        headers = {"Service-Signature": service_signature(BODY, [KEY])}
        event = tw.verify(BODY.encode(), headers, KEY, now=NOW)
        self.assertEqual(event["data"]["name"], "Zoë / Ø <&>")

    def test_either_key_of_a_rotation(self):
        headers = {"service-signature": service_signature(BODY, [KEY, OLD_KEY])}
        self.assertEqual(tw.verify(BODY, headers, [OLD_KEY], now=NOW)["id"], "evt_1")
        self.assertEqual(tw.verify(BODY, headers, [KEY], now=NOW)["id"], "evt_1")
        with self.assertRaises(tw.NoMatchingSignature):
            tw.verify(BODY, {"service-signature": service_signature(BODY, [KEY])}, OLD_KEY, now=NOW)

    def test_standard_webhooks_v1(self):
        headers = standard_headers(BODY, [KEY])
        self.assertEqual(tw.verify(BODY, headers, [KEY], now=NOW)["type"], "client.created")
        with self.assertRaises(tw.NoMatchingSignature):
            tw.verify(BODY, headers, [OLD_KEY], now=NOW)

    @needs_cryptography
    def test_v1a_with_the_public_key_alone(self):
        pair, other = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
        headers = standard_headers(BODY, [KEY], [pair])
        self.assertEqual(tw.verify(BODY, headers, [public_key(pair)], now=NOW)["id"], "evt_1")
        with self.assertRaises(tw.NoMatchingSignature):
            tw.verify(BODY, headers, [public_key(other)], now=NOW)
        with self.assertRaises(tw.MalformedHeader):
            tw.verify(BODY, standard_headers(BODY, [KEY]), [public_key(pair)], now=NOW)

    def test_one_byte_of_the_body(self):
        headers = {"service-signature": service_signature(BODY, [KEY])}
        with self.assertRaises(tw.NoMatchingSignature) as caught:
            tw.verify(BODY.replace("created", "createe", 1), headers, KEY, now=NOW)
        self.assertNotIsInstance(caught.exception, tw.BodyNotRaw)

    def test_a_body_parsed_and_serialised_again(self):
        headers = {"service-signature": service_signature(BODY, [KEY])}
        for again in (
            json.dumps(json.loads(BODY)),
            json.dumps(json.loads(BODY), separators=(",", ":")),
            json.dumps(json.loads(BODY), separators=(",", ":"), ensure_ascii=False, sort_keys=True),
        ):
            with self.assertRaisesRegex(tw.BodyNotRaw, "parsed and serialised again"):
                tw.verify(again, headers, KEY, now=NOW)

    def test_the_timestamp_outside_the_tolerance(self):
        headers = {"service-signature": service_signature(BODY, [KEY])}
        for now in (NOW + 301, NOW - 301):
            with self.assertRaises(tw.TimestampOutsideTolerance):
                tw.verify(BODY, headers, KEY, now=now)
        self.assertEqual(tw.verify(BODY, headers, KEY, now=NOW + 300)["id"], "evt_1")
        self.assertEqual(tw.verify(BODY, headers, KEY, now=NOW + 900, tolerance=900)["id"], "evt_1")

    def test_headers_missing_or_malformed(self):
        with self.assertRaises(tw.MissingHeader):
            tw.verify(BODY, {"content-type": "application/json"}, KEY, now=NOW)
        with self.assertRaises(tw.MalformedHeader):
            tw.verify(BODY, {"service-signature": f"t={NOW}"}, KEY, now=NOW)
        with self.assertRaises(tw.MalformedHeader):
            tw.verify(BODY, {"service-signature": "v1=" + "0" * 64}, KEY, now=NOW)
        headers = standard_headers(BODY, [KEY])
        del headers["webhook-id"]
        with self.assertRaises(tw.MissingHeader):
            tw.verify(BODY, headers, KEY, now=NOW)

    def test_keys_of_another_kind(self):
        for keys in ([], ["sk_live_123"], ["whpk_short"]):
            with self.assertRaises(tw.InvalidKey):
                tw.verify(BODY, {"service-signature": service_signature(BODY, [KEY])}, keys)

    def test_a_parsed_body_is_a_type_error(self):
        with self.assertRaisesRegex(TypeError, "not a parsed dict"):
            tw.verify(json.loads(BODY), {"service-signature": service_signature(BODY, [KEY])}, KEY)

    def test_headers_in_any_case_or_a_wsgi_environ(self):
        signature = service_signature(BODY, [KEY])
        for headers in (
            {"SERVICE-SIGNATURE": signature},
            {"HTTP_SERVICE_SIGNATURE": signature},
            {"service-signature": [signature]},
        ):
            self.assertEqual(tw.verify(BODY, headers, KEY, now=NOW)["id"], "evt_1")


ERRORS = {
    "ok": None,
    "InvalidKey": tw.InvalidKey,
    "MissingHeader": tw.MissingHeader,
    "MalformedHeader": tw.MalformedHeader,
    "TimestampOutsideTolerance": tw.TimestampOutsideTolerance,
    "NoMatchingSignature": tw.NoMatchingSignature,
    "BodyNotRaw": tw.BodyNotRaw,
}


def captured_cases():
    path = os.environ.get("TOUROPS_WEBHOOK_CASES")
    if not path:
        return None
    with open(path, encoding="utf-8") as file:
        return json.load(file)


@unittest.skipUnless(os.environ.get("TOUROPS_WEBHOOK_CASES"), "no captured deliveries")
class RealDeliveries(unittest.TestCase):
    def verify(self, case, body):
        return tw.verify(
            body.encode(), case["headers"], case["keys"], now=case["now"], tolerance=case["tolerance"]
        )

    def test_every_case(self):
        cases = captured_cases()
        self.assertGreater(len(cases), 0)
        for case in cases:
            with self.subTest(case["name"]):
                if Ed25519PrivateKey is None and any(k.startswith("whpk_") for k in case["keys"]):
                    self.skipTest(NO_CRYPTOGRAPHY)
                expected = ERRORS[case["expect"]]
                if expected is None:
                    event = self.verify(case, case["body"])
                    self.assertEqual((event["id"], event["type"]), (case["eventId"], case["eventType"]))
                else:
                    with self.assertRaises(expected) as caught:
                        self.verify(case, case["body"])
                    # A subclass is another check: BodyNotRaw is not what a changed byte gets.
                    self.assertIs(type(caught.exception), expected)

    def test_each_delivery_parsed_and_serialised_again_by_json(self):
        deliveries = [case for case in captured_cases() if case["expect"] == "ok"]
        self.assertGreater(len(deliveries), 0)
        for case in deliveries:
            with self.subTest(case["name"]):
                if Ed25519PrivateKey is None and any(k.startswith("whpk_") for k in case["keys"]):
                    self.skipTest(NO_CRYPTOGRAPHY)
                again = json.dumps(json.loads(case["body"]))
                self.assertNotEqual(again, case["body"])
                with self.assertRaises(tw.BodyNotRaw):
                    self.verify(case, again)


if __name__ == "__main__":
    unittest.main()
