// Package tourops verifies TourOps webhook deliveries before a receiver acts on them.
//
//	event, err := tourops.Verify(body, r.Header, "whsec_...")
//	if err != nil { http.Error(w, err.Error(), http.StatusBadRequest); return }
//
// Every way the service signs is checked: Service-Signature (t=<unix seconds>,v1=<hex>, one v1
// per live key during a rotation), Standard Webhooks webhook-signature with v1 (HMAC, the same
// whsec_ key) and v1a (Ed25519, verified with the subscription's whpk_ public key). The body must
// be the bytes received: one parsed and serialised again no longer matches its signature and is
// refused with ErrBodyNotRaw. Errors wrap one of the Err values below: test them with errors.Is.
package tourops

import (
	"bytes"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// DefaultTolerance is the largest distance, either way, between a delivery's timestamp and now.
const DefaultTolerance = 5 * time.Minute

const (
	signingKeyPrefix = "whsec_"
	publicKeyPrefix  = "whpk_"
)

// The checks a delivery can fail, one error each. Every error Verify returns wraps one of them.
var (
	// ErrInvalidKey: a key given is neither a signing key (whsec_) nor a public key (whpk_).
	ErrInvalidKey = errors.New("tourops: invalid key")
	// ErrMissingHeader: the delivery lacks the signature headers the keys given verify.
	ErrMissingHeader = errors.New("tourops: signature header missing")
	// ErrMalformedHeader: a signature header is there but does not hold what it must.
	ErrMalformedHeader = errors.New("tourops: signature header malformed")
	// ErrTimestampOutsideTolerance: the signed timestamp is further from now than the tolerance.
	ErrTimestampOutsideTolerance = errors.New("tourops: timestamp outside the tolerance")
	// ErrNoMatchingSignature: no signature was made with any of the keys given, over this body.
	ErrNoMatchingSignature = errors.New("tourops: no signature matches the keys")
	// ErrBodyNotRaw: no signature matches, and the body is not as the service sends it: it was
	// parsed and serialised again. It wraps ErrNoMatchingSignature.
	ErrBodyNotRaw = fmt.Errorf("%w, and the body was parsed and serialised again: verify the bytes received", ErrNoMatchingSignature)
)

// Event is a delivery's body. Data holds the event's data as sent; unmarshal it into the type
// the event's Type names.
type Event struct {
	ID       string          `json:"id"`
	Type     string          `json:"type"`
	Created  int64           `json:"created"`
	Test     bool            `json:"test,omitempty"`
	Sequence *int64          `json:"sequence,omitempty"`
	Data     json.RawMessage `json:"data"`
}

// Verifier verifies deliveries with a subscription's keys.
type Verifier struct {
	// Keys: the signing key, or every key of a rotation (whsec_), and/or the public keys (whpk_)
	// that verify v1a signatures.
	Keys []string
	// Tolerance: zero means DefaultTolerance.
	Tolerance time.Duration
	// Now: nil means time.Now.
	Now func() time.Time
}

// Verify verifies one delivery with keys and the default tolerance, and returns its event.
func Verify(body []byte, header http.Header, keys ...string) (*Event, error) {
	return Verifier{Keys: keys}.Verify(body, header)
}

// Verify verifies one delivery (body: the bytes received) and returns its event.
func (v Verifier) Verify(body []byte, header http.Header) (*Event, error) {
	secrets, publicKeys, err := splitKeys(v.Keys)
	if err != nil {
		return nil, err
	}
	if len(publicKeys) > 0 {
		event, err := v.verifyV1a(body, header, publicKeys)
		if err == nil || len(secrets) == 0 {
			return event, err
		}
	}
	if signature := header.Get("Service-Signature"); signature != "" {
		return v.verifyServiceSignature(body, signature, secrets)
	}
	if header.Get("Webhook-Signature") != "" {
		return v.verifyV1(body, header, secrets)
	}
	return nil, fmt.Errorf("%w: no Service-Signature or webhook-signature header", ErrMissingHeader)
}

func splitKeys(keys []string) (secrets []string, publicKeys []ed25519.PublicKey, err error) {
	if len(keys) == 0 {
		return nil, nil, fmt.Errorf("%w: no key given: pass the subscription's signing key (whsec_...)", ErrInvalidKey)
	}
	for _, key := range keys {
		switch {
		case strings.HasPrefix(key, signingKeyPrefix):
			secrets = append(secrets, key)
		case strings.HasPrefix(key, publicKeyPrefix):
			raw, err := base64.StdEncoding.DecodeString(key[len(publicKeyPrefix):])
			if err != nil || len(raw) != ed25519.PublicKeySize {
				return nil, nil, fmt.Errorf("%w: %.9s... is not a whpk_ key (base64 of 32 bytes)", ErrInvalidKey, key)
			}
			publicKeys = append(publicKeys, ed25519.PublicKey(raw))
		default:
			return nil, nil, fmt.Errorf("%w: a key starting %q is neither a signing key (whsec_) nor a public key (whpk_)", ErrInvalidKey, prefix(key, 4))
		}
	}
	return secrets, publicKeys, nil
}

func prefix(text string, n int) string {
	if len(text) < n {
		return text
	}
	return text[:n]
}

func (v Verifier) checkTimestamp(timestamp int64) error {
	now := time.Now()
	if v.Now != nil {
		now = v.Now()
	}
	tolerance := v.Tolerance
	if tolerance == 0 {
		tolerance = DefaultTolerance
	}
	distance := now.Unix() - timestamp
	if distance < 0 {
		distance = -distance
	}
	if time.Duration(distance)*time.Second > tolerance {
		return fmt.Errorf("%w: the signed timestamp %d is %d s from now, more than %v", ErrTimestampOutsideTolerance, timestamp, distance, tolerance)
	}
	return nil
}

func parseSeconds(text string) (int64, bool) {
	if text == "" || len(text) > 15 || strings.Trim(text, "0123456789") != "" {
		return 0, false
	}
	seconds, err := strconv.ParseInt(text, 10, 64)
	return seconds, err == nil
}

func (v Verifier) verifyServiceSignature(body []byte, header string, secrets []string) (*Event, error) {
	var timestamp int64
	var haveTimestamp bool
	var candidates [][]byte
	for _, part := range strings.Split(header, ",") {
		name, value, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch name {
		case "t":
			timestamp, haveTimestamp = parseSeconds(value)
		case "v1":
			if decoded, err := hex.DecodeString(value); err == nil && len(decoded) == sha256.Size && strings.ToLower(value) == value {
				candidates = append(candidates, decoded)
			}
		}
	}
	if !haveTimestamp || len(candidates) == 0 {
		return nil, fmt.Errorf("%w: Service-Signature has no t= or no v1=", ErrMalformedHeader)
	}
	if err := v.checkTimestamp(timestamp); err != nil {
		return nil, err
	}
	signed := strconv.FormatInt(timestamp, 10) + "."
	macs := make([][]byte, 0, len(secrets))
	for _, key := range secrets {
		macs = append(macs, mac([]byte(key), signed, body))
	}
	return signedEvent(body, macs, candidates, "Service-Signature")
}

func mac(key []byte, signed string, body []byte) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(signed))
	h.Write(body)
	return h.Sum(nil)
}

// standardHeaders returns the signed prefix ("<webhook-id>.<webhook-timestamp>.") and the
// signatures of version in webhook-signature, decoded.
func (v Verifier) standardHeaders(header http.Header, version string) (string, [][]byte, error) {
	signature, id, stamp := header.Get("Webhook-Signature"), header.Get("Webhook-Id"), header.Get("Webhook-Timestamp")
	if signature == "" || id == "" || stamp == "" {
		return "", nil, fmt.Errorf("%w: webhook-signature, webhook-id or webhook-timestamp missing (the subscription must have standardWebhooks on)", ErrMissingHeader)
	}
	timestamp, ok := parseSeconds(stamp)
	if !ok {
		return "", nil, fmt.Errorf("%w: webhook-timestamp %q is not Unix seconds", ErrMalformedHeader, prefix(stamp, 20))
	}
	if err := v.checkTimestamp(timestamp); err != nil {
		return "", nil, err
	}
	var candidates [][]byte
	for _, part := range strings.Split(signature, " ") {
		if strings.HasPrefix(part, version+",") {
			if decoded, err := base64.StdEncoding.DecodeString(part[len(version)+1:]); err == nil {
				candidates = append(candidates, decoded)
			}
		}
	}
	if len(candidates) == 0 {
		hint := ""
		if version == "v1a" {
			hint = " (is asymmetricSignatures on?)"
		}
		return "", nil, fmt.Errorf("%w: webhook-signature has no %s signature%s", ErrMalformedHeader, version, hint)
	}
	return id + "." + stamp + ".", candidates, nil
}

func (v Verifier) verifyV1(body []byte, header http.Header, secrets []string) (*Event, error) {
	signed, candidates, err := v.standardHeaders(header, "v1")
	if err != nil {
		return nil, err
	}
	macs := make([][]byte, 0, len(secrets))
	for _, key := range secrets {
		// Keys made before the base64 form (43 base64url characters) cannot sign v1: skipped.
		if secret, err := base64.StdEncoding.DecodeString(key[len(signingKeyPrefix):]); err == nil {
			macs = append(macs, mac(secret, signed, body))
		}
	}
	return signedEvent(body, macs, candidates, "webhook-signature v1")
}

func (v Verifier) verifyV1a(body []byte, header http.Header, publicKeys []ed25519.PublicKey) (*Event, error) {
	signed, candidates, err := v.standardHeaders(header, "v1a")
	if err != nil {
		return nil, err
	}
	message := append([]byte(signed), body...)
	matched := false
	for _, key := range publicKeys {
		for _, candidate := range candidates {
			if ed25519.Verify(key, message, candidate) {
				matched = true
			}
		}
	}
	if !matched {
		return nil, refusal(body, "no v1a signature in webhook-signature matches the public keys")
	}
	return event(body)
}

// signedEvent compares every pair, so the time taken does not tell which key or signature matched.
func signedEvent(body []byte, macs, candidates [][]byte, where string) (*Event, error) {
	matched := false
	for _, m := range macs {
		for _, candidate := range candidates {
			if hmac.Equal(m, candidate) {
				matched = true
			}
		}
	}
	if !matched {
		return nil, refusal(body, "no signature in "+where+" matches the signing keys")
	}
	return event(body)
}

func refusal(body []byte, detail string) error {
	if notAsSent(body) {
		return fmt.Errorf("%w (%s)", ErrBodyNotRaw, detail)
	}
	return fmt.Errorf("%w: %s", ErrNoMatchingSignature, detail)
}

func event(body []byte) (*Event, error) {
	var e Event
	if err := json.Unmarshal(body, &e); err != nil {
		return nil, fmt.Errorf("tourops: the signed body is not an event: %w", err)
	}
	return &e, nil
}

// notAsSent tells whether the body cannot be one the service sent: it sends compact JSON that
// starts with the event id, escapes only what JSON requires (lower-case hex), never writes \/.
func notAsSent(body []byte) bool {
	if !bytes.HasPrefix(body, []byte(`{"id":"`)) {
		return true
	}
	inString := false
	for i := 0; i < len(body); i++ {
		c := body[i]
		switch {
		case inString && c == '\\':
			if i+1 >= len(body) {
				return true
			}
			switch body[i+1] {
			case '/':
				return true
			case 'u':
				if i+6 > len(body) {
					return true
				}
				digits := string(body[i+2 : i+6])
				code, err := strconv.ParseUint(digits, 16, 16)
				if err != nil || strings.ToLower(digits) != digits {
					return true
				}
				if code == 0x08 || code == 0x09 || code == 0x0a || code == 0x0c || code == 0x0d ||
					(code >= 0x20 && (code < 0xd800 || code > 0xdfff)) {
					return true
				}
				i += 5
			default:
				i++
			}
		case inString && c == '"':
			inString = false
		case !inString && (c == ' ' || c == '\t' || c == '\r' || c == '\n'):
			return true
		case !inString && c == '"':
			inString = true
		}
	}
	return false
}
