<?php

declare(strict_types=1);

namespace TourOps\Webhooks;

/**
 * Verifies TourOps webhook deliveries before a receiver acts on them.
 *
 *     $event = (new Verifier(['whsec_...']))->verify(file_get_contents('php://input'), getallheaders());
 *
 * Every way the service signs is checked: `Service-Signature` (`t=<unix seconds>,v1=<hex>`, one
 * `v1` per live key during a rotation), Standard Webhooks `webhook-signature` with `v1` (HMAC,
 * the same `whsec_` key) and `v1a` (Ed25519, verified with the subscription's `whpk_` public
 * key). The body must be the bytes received. Each failed check throws its own subclass of
 * VerificationException.
 */
final class Verifier
{
    /** Largest distance, in seconds and either way, between a delivery's timestamp and now. */
    public const DEFAULT_TOLERANCE = 300;

    private const SIGNING_KEY_PREFIX = 'whsec_';
    private const PUBLIC_KEY_PREFIX = 'whpk_';

    /** @var list<string> */
    private array $secrets = [];
    /** @var list<string> raw 32-byte Ed25519 public keys */
    private array $publicKeys = [];

    /**
     * @param string|list<string> $keys the signing key, or every key of a rotation (`whsec_`),
     *     and/or the public keys (`whpk_`) that verify `v1a` signatures
     */
    public function __construct(string|array $keys, private readonly int $tolerance = self::DEFAULT_TOLERANCE)
    {
        $keys = is_string($keys) ? [$keys] : array_values($keys);
        if ($keys === []) {
            throw new InvalidKeyException("no key given: pass the subscription's signing key (whsec_...)");
        }
        foreach ($keys as $key) {
            if (str_starts_with($key, self::SIGNING_KEY_PREFIX)) {
                $this->secrets[] = $key;
            } elseif (str_starts_with($key, self::PUBLIC_KEY_PREFIX)) {
                $raw = base64_decode(substr($key, strlen(self::PUBLIC_KEY_PREFIX)), true);
                if ($raw === false || strlen($raw) !== SODIUM_CRYPTO_SIGN_PUBLICKEYBYTES) {
                    throw new InvalidKeyException(substr($key, 0, 9) . '... is not a whpk_ key (base64 of 32 bytes)');
                }
                $this->publicKeys[] = $raw;
            } else {
                throw new InvalidKeyException(sprintf(
                    "a key starting '%s' is neither a signing key (whsec_) nor a public key (whpk_)",
                    substr($key, 0, 4),
                ));
            }
        }
    }

    /**
     * Verifies one delivery and returns its event (the body, decoded).
     *
     * @param string $rawBody the body as received: `file_get_contents('php://input')`
     * @param array<string, string|list<string>> $headers the request's headers in any case
     *     (`getallheaders()`, a PSR-7 `getHeaders()`, or `$_SERVER`)
     * @param int|null $now Unix seconds; null for the clock's
     * @return array<string, mixed>
     * @throws VerificationException a subclass naming the check that failed
     */
    public function verify(string $rawBody, array $headers, ?int $now = null): array
    {
        $now ??= time();
        if ($this->publicKeys !== []) {
            try {
                return $this->verifyV1a($rawBody, $headers, $now);
            } catch (VerificationException $error) {
                if ($this->secrets === []) {
                    throw $error;
                }
            }
        }
        $serviceSignature = self::header($headers, 'service-signature');
        if ($serviceSignature !== null) {
            return $this->verifyServiceSignature($rawBody, $serviceSignature, $now);
        }
        if (self::header($headers, 'webhook-signature') !== null) {
            return $this->verifyV1($rawBody, $headers, $now);
        }
        throw new MissingHeaderException('no Service-Signature or webhook-signature header');
    }

    /** @param array<string, string|list<string>> $headers */
    private static function header(array $headers, string $name): ?string
    {
        $server = 'HTTP_' . strtoupper(str_replace('-', '_', $name));
        foreach ($headers as $key => $value) {
            if (strtolower((string) $key) === $name || $key === $server) {
                return is_array($value) ? ($value[0] ?? null) : $value;
            }
        }
        return null;
    }

    private function checkTimestamp(int $timestamp, int $now): void
    {
        $distance = abs($now - $timestamp);
        if ($distance > $this->tolerance) {
            throw new TimestampOutsideToleranceException(sprintf(
                'the signed timestamp %d is %d s from now, more than the tolerance of %d s',
                $timestamp,
                $distance,
                $this->tolerance,
            ));
        }
    }

    /** @return array<string, mixed> */
    private function verifyServiceSignature(string $rawBody, string $header, int $now): array
    {
        $timestamp = null;
        $candidates = [];
        foreach (explode(',', $header) as $part) {
            [$name, $value] = array_pad(explode('=', trim($part), 2), 2, '');
            if ($name === 't' && preg_match('/^[0-9]{1,15}$/', $value) === 1) {
                $timestamp = (int) $value;
            } elseif ($name === 'v1' && preg_match('/^[0-9a-f]{64}$/', $value) === 1) {
                $candidates[] = (string) hex2bin($value);
            }
        }
        if ($timestamp === null || $candidates === []) {
            throw new MalformedHeaderException('Service-Signature has no t= or no v1=');
        }
        $this->checkTimestamp($timestamp, $now);
        $macs = array_map(
            static fn (string $key): string => hash_hmac('sha256', "{$timestamp}.{$rawBody}", $key, true),
            $this->secrets,
        );
        return self::signedEvent($rawBody, $macs, $candidates, 'Service-Signature');
    }

    /**
     * The signed prefix (`<webhook-id>.<webhook-timestamp>.`) and the signatures of `$version`.
     *
     * @param array<string, string|list<string>> $headers
     * @return array{string, list<string>}
     */
    private function standardHeaders(array $headers, string $version, int $now): array
    {
        $signature = self::header($headers, 'webhook-signature');
        $id = self::header($headers, 'webhook-id');
        $stamp = self::header($headers, 'webhook-timestamp');
        if ($signature === null || $id === null || $stamp === null) {
            throw new MissingHeaderException(
                'webhook-signature, webhook-id or webhook-timestamp missing (the subscription must have standardWebhooks on)',
            );
        }
        if (preg_match('/^[0-9]{1,15}$/', $stamp) !== 1) {
            throw new MalformedHeaderException(sprintf("webhook-timestamp '%s' is not Unix seconds", substr($stamp, 0, 20)));
        }
        $this->checkTimestamp((int) $stamp, $now);
        $candidates = [];
        foreach (explode(' ', $signature) as $part) {
            if (str_starts_with($part, "{$version},")) {
                $decoded = base64_decode(substr($part, strlen($version) + 1), true);
                if ($decoded !== false) {
                    $candidates[] = $decoded;
                }
            }
        }
        if ($candidates === []) {
            $hint = $version === 'v1a' ? ' (is asymmetricSignatures on?)' : '';
            throw new MalformedHeaderException("webhook-signature has no {$version} signature{$hint}");
        }
        return ["{$id}.{$stamp}.", $candidates];
    }

    /**
     * @param array<string, string|list<string>> $headers
     * @return array<string, mixed>
     */
    private function verifyV1(string $rawBody, array $headers, int $now): array
    {
        [$signed, $candidates] = $this->standardHeaders($headers, 'v1', $now);
        $macs = [];
        foreach ($this->secrets as $key) {
            // Keys made before the base64 form (43 base64url characters) cannot sign v1: skipped.
            $secret = base64_decode(substr($key, strlen(self::SIGNING_KEY_PREFIX)), true);
            if ($secret !== false) {
                $macs[] = hash_hmac('sha256', $signed . $rawBody, $secret, true);
            }
        }
        return self::signedEvent($rawBody, $macs, $candidates, 'webhook-signature v1');
    }

    /**
     * @param array<string, string|list<string>> $headers
     * @return array<string, mixed>
     */
    private function verifyV1a(string $rawBody, array $headers, int $now): array
    {
        [$signed, $candidates] = $this->standardHeaders($headers, 'v1a', $now);
        $message = $signed . $rawBody;
        $matched = false;
        foreach ($this->publicKeys as $key) {
            foreach ($candidates as $candidate) {
                if (
                    strlen($candidate) === SODIUM_CRYPTO_SIGN_BYTES
                    && sodium_crypto_sign_verify_detached($candidate, $message, $key)
                ) {
                    $matched = true;
                }
            }
        }
        if (!$matched) {
            self::refuse($rawBody, 'no v1a signature in webhook-signature matches the public keys');
        }
        return self::event($rawBody);
    }

    /**
     * Every pair is compared, so the time taken does not tell which key or signature matched.
     *
     * @param list<string> $macs
     * @param list<string> $candidates
     * @return array<string, mixed>
     */
    private static function signedEvent(string $rawBody, array $macs, array $candidates, string $where): array
    {
        $matched = false;
        foreach ($macs as $mac) {
            foreach ($candidates as $candidate) {
                if (hash_equals($mac, $candidate)) {
                    $matched = true;
                }
            }
        }
        if (!$matched) {
            self::refuse($rawBody, "no signature in {$where} matches the signing keys");
        }
        return self::event($rawBody);
    }

    private static function refuse(string $rawBody, string $message): never
    {
        if (self::notAsSent($rawBody)) {
            throw new BodyNotRawException(
                "{$message}, and the body is not as the service sends it: it was parsed and serialised again. "
                . "Verify the bytes received (file_get_contents('php://input')), before any JSON decoding",
            );
        }
        throw new NoMatchingSignatureException($message);
    }

    /** @return array<string, mixed> */
    private static function event(string $rawBody): array
    {
        return json_decode($rawBody, true, 512, JSON_THROW_ON_ERROR);
    }

    /**
     * Whether the body cannot be one the service sent: it sends compact JSON that starts with the
     * event id, escapes only what JSON requires (lower-case hex), and never writes `\/`.
     */
    private static function notAsSent(string $body): bool
    {
        if (!str_starts_with($body, '{"id":"')) {
            return true;
        }
        $inString = false;
        $length = strlen($body);
        for ($i = 0; $i < $length; $i++) {
            $byte = $body[$i];
            if ($inString && $byte === '\\') {
                $escaped = $body[$i + 1] ?? '';
                if ($escaped === '/') {
                    return true;
                }
                if ($escaped === 'u') {
                    $digits = substr($body, $i + 2, 4);
                    if (preg_match('/^[0-9a-f]{4}$/', $digits) !== 1) {
                        return true;
                    }
                    $code = hexdec($digits);
                    if (in_array($code, [0x08, 0x09, 0x0a, 0x0c, 0x0d], true)
                        || ($code >= 0x20 && ($code < 0xd800 || $code > 0xdfff))) {
                        return true;
                    }
                    $i += 5;
                } else {
                    $i++;
                }
            } elseif ($inString && $byte === '"') {
                $inString = false;
            } elseif (!$inString && ($byte === ' ' || $byte === "\t" || $byte === "\r" || $byte === "\n")) {
                return true;
            } elseif (!$inString && $byte === '"') {
                $inString = true;
            }
        }
        return false;
    }
}
