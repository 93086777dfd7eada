package tourops

// go test ./... (in sdk/go). The first tests sign as the service does, with keys made here.
// TestRealDeliveries runs the cases a test of the service captured from real deliveries
// (TOUROPS_WEBHOOK_CASES, a JSON file: see test/verifier-packages.test.ts); skipped without them.

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

const now = 1790000000

var (
	key    = "whsec_" + base64.StdEncoding.EncodeToString([]byte(strings.Repeat("k", 33)))
	oldKey = "whsec_" + base64.StdEncoding.EncodeToString([]byte(strings.Repeat("o", 33)))
	body   = fmt.Sprintf(`{"id":"evt_1","type":"client.created","created":%d,"data":{"name":"Zoë / Ø <&>"}}`, now)
)

func at(seconds int64) func() time.Time { return func() time.Time { return time.Unix(seconds, 0) } }

func serviceSignature(body string, keys ...string) http.Header {
	parts := []string{fmt.Sprintf("t=%d", now)}
	for _, k := range keys {
		parts = append(parts, "v1="+hex.EncodeToString(mac([]byte(k), fmt.Sprintf("%d.", now), []byte(body))))
	}
	return http.Header{"Service-Signature": {strings.Join(parts, ",")}}
}

func standardHeaders(body string, keys []string, pairs ...ed25519.PrivateKey) http.Header {
	signed := fmt.Sprintf("evt_1.%d.", now)
	var parts []string
	for _, k := range keys {
		secret, _ := base64.StdEncoding.DecodeString(k[len("whsec_"):])
		parts = append(parts, "v1,"+base64.StdEncoding.EncodeToString(mac(secret, signed, []byte(body))))
	}
	for _, pair := range pairs {
		parts = append(parts, "v1a,"+base64.StdEncoding.EncodeToString(ed25519.Sign(pair, []byte(signed+body))))
	}
	header := http.Header{}
	header.Set("webhook-id", "evt_1")
	header.Set("webhook-timestamp", fmt.Sprint(now))
	header.Set("webhook-signature", strings.Join(parts, " "))
	return header
}

func newPair(t *testing.T) (ed25519.PrivateKey, string) {
	public, private, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return private, "whpk_" + base64.StdEncoding.EncodeToString(public)
}

func expectError(t *testing.T, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("got %v, want %v", err, want)
	}
	if want == ErrNoMatchingSignature && errors.Is(err, ErrBodyNotRaw) {
		t.Fatalf("got %v, want %v alone", err, want)
	}
}

func TestServiceSignatureReturnsTheEvent(t *testing.T) {
	event, err := Verifier{Keys: []string{key}, Now: at(now)}.Verify([]byte(body), serviceSignature(body, key))
	if err != nil {
		t.Fatal(err)
	}
	var data struct{ Name string }
	if err := json.Unmarshal(event.Data, &data); err != nil || event.ID != "evt_1" || data.Name != "Zoë / Ø <&>" {
		t.Fatalf("%+v %v", event, err)
	}
}

func TestEitherKeyOfARotation(t *testing.T) {
	both := serviceSignature(body, key, oldKey)
	for _, k := range []string{key, oldKey} {
		if _, err := (Verifier{Keys: []string{k}, Now: at(now)}).Verify([]byte(body), both); err != nil {
			t.Fatal(err)
		}
	}
	_, err := Verifier{Keys: []string{oldKey}, Now: at(now)}.Verify([]byte(body), serviceSignature(body, key))
	expectError(t, err, ErrNoMatchingSignature)
}

func TestStandardWebhooksV1(t *testing.T) {
	header := standardHeaders(body, []string{key})
	if _, err := (Verifier{Keys: []string{key}, Now: at(now)}).Verify([]byte(body), header); err != nil {
		t.Fatal(err)
	}
	_, err := Verifier{Keys: []string{oldKey}, Now: at(now)}.Verify([]byte(body), header)
	expectError(t, err, ErrNoMatchingSignature)
}

func TestV1aWithThePublicKeyAlone(t *testing.T) {
	pair, public := newPair(t)
	_, other := newPair(t)
	header := standardHeaders(body, []string{key}, pair)
	if _, err := (Verifier{Keys: []string{public}, Now: at(now)}).Verify([]byte(body), header); err != nil {
		t.Fatal(err)
	}
	_, err := Verifier{Keys: []string{other}, Now: at(now)}.Verify([]byte(body), header)
	expectError(t, err, ErrNoMatchingSignature)
	_, err = Verifier{Keys: []string{public}, Now: at(now)}.Verify([]byte(body), standardHeaders(body, []string{key}))
	expectError(t, err, ErrMalformedHeader)
}

func TestOneByteOfTheBody(t *testing.T) {
	changed := strings.Replace(body, "created", "createe", 1)
	_, err := Verifier{Keys: []string{key}, Now: at(now)}.Verify([]byte(changed), serviceSignature(body, key))
	expectError(t, err, ErrNoMatchingSignature)
}

func TestABodyParsedAndSerialisedAgain(t *testing.T) {
	var parsed map[string]any
	if err := json.Unmarshal([]byte(body), &parsed); err != nil {
		t.Fatal(err)
	}
	compact, _ := json.Marshal(parsed)
	indented, _ := json.MarshalIndent(parsed, "", "  ")
	for _, again := range [][]byte{compact, indented} {
		_, err := Verifier{Keys: []string{key}, Now: at(now)}.Verify(again, serviceSignature(body, key))
		expectError(t, err, ErrBodyNotRaw)
		if !strings.Contains(err.Error(), "parsed and serialised again") {
			t.Fatal(err)
		}
	}
}

func TestTheTimestampOutsideTheTolerance(t *testing.T) {
	header := serviceSignature(body, key)
	for _, seconds := range []int64{now + 301, now - 301} {
		_, err := Verifier{Keys: []string{key}, Now: at(seconds)}.Verify([]byte(body), header)
		expectError(t, err, ErrTimestampOutsideTolerance)
	}
	if _, err := (Verifier{Keys: []string{key}, Now: at(now + 300)}).Verify([]byte(body), header); err != nil {
		t.Fatal(err)
	}
	wide := Verifier{Keys: []string{key}, Now: at(now + 900), Tolerance: 15 * time.Minute}
	if _, err := wide.Verify([]byte(body), header); err != nil {
		t.Fatal(err)
	}
}

func TestHeadersMissingOrMalformed(t *testing.T) {
	v := Verifier{Keys: []string{key}, Now: at(now)}
	_, err := v.Verify([]byte(body), http.Header{"Content-Type": {"application/json"}})
	expectError(t, err, ErrMissingHeader)
	_, err = v.Verify([]byte(body), http.Header{"Service-Signature": {fmt.Sprintf("t=%d", now)}})
	expectError(t, err, ErrMalformedHeader)
	_, err = v.Verify([]byte(body), http.Header{"Service-Signature": {"v1=" + strings.Repeat("0", 64)}})
	expectError(t, err, ErrMalformedHeader)
	header := standardHeaders(body, []string{key})
	header.Del("webhook-id")
	_, err = v.Verify([]byte(body), header)
	expectError(t, err, ErrMissingHeader)
}

func TestKeysOfAnotherKind(t *testing.T) {
	for _, keys := range [][]string{nil, {"sk_live_123"}, {"whpk_short"}} {
		_, err := Verify([]byte(body), serviceSignature(body, key), keys...)
		expectError(t, err, ErrInvalidKey)
	}
}

// captured is one case of TOUROPS_WEBHOOK_CASES.
type captured struct {
	Name      string            `json:"name"`
	Body      string            `json:"body"`
	Headers   map[string]string `json:"headers"`
	Keys      []string          `json:"keys"`
	Now       int64             `json:"now"`
	Tolerance int64             `json:"tolerance"`
	Expect    string            `json:"expect"`
	EventID   string            `json:"eventId"`
	EventType string            `json:"eventType"`
}

var checks = map[string]error{
	"InvalidKey":                ErrInvalidKey,
	"MissingHeader":             ErrMissingHeader,
	"MalformedHeader":           ErrMalformedHeader,
	"TimestampOutsideTolerance": ErrTimestampOutsideTolerance,
	"NoMatchingSignature":       ErrNoMatchingSignature,
	"BodyNotRaw":                ErrBodyNotRaw,
}

func (c captured) verify(body []byte) (*Event, error) {
	header := http.Header{}
	for name, value := range c.Headers {
		header.Set(name, value)
	}
	v := Verifier{Keys: c.Keys, Now: at(c.Now), Tolerance: time.Duration(c.Tolerance) * time.Second}
	return v.Verify(body, header)
}

func TestRealDeliveries(t *testing.T) {
	path := os.Getenv("TOUROPS_WEBHOOK_CASES")
	if path == "" {
		t.Skip("no captured deliveries")
	}
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cases []captured
	if err := json.Unmarshal(text, &cases); err != nil || len(cases) == 0 {
		t.Fatalf("%d cases: %v", len(cases), err)
	}
	for _, c := range cases {
		c := c
		t.Run(c.Name, func(t *testing.T) {
			event, err := c.verify([]byte(c.Body))
			if c.Expect == "ok" {
				if err != nil {
					t.Fatal(err)
				}
				if event.ID != c.EventID || event.Type != c.EventType {
					t.Fatalf("%s %s", event.ID, event.Type)
				}
				// Decoded into a map and encoded again, as a handler that parsed first would.
				var parsed map[string]any
				if err := json.Unmarshal([]byte(c.Body), &parsed); err != nil {
					t.Fatal(err)
				}
				again, _ := json.Marshal(parsed)
				_, err = c.verify(again)
				expectError(t, err, ErrBodyNotRaw)
				return
			}
			want, known := checks[c.Expect]
			if !known {
				t.Fatalf("unknown expectation %q", c.Expect)
			}
			expectError(t, err, want)
		})
	}
}
