<?php
// Signs as the service does, with keys made here: each check the Verifier makes, and its error.
declare(strict_types=1);

namespace TourOps\Webhooks\Tests;

require_once __DIR__ . '/AssertsRefusal.php';

use PHPUnit\Framework\TestCase;
use TourOps\Webhooks\BodyNotRawException;
use TourOps\Webhooks\InvalidKeyException;
use TourOps\Webhooks\MalformedHeaderException;
use TourOps\Webhooks\MissingHeaderException;
use TourOps\Webhooks\NoMatchingSignatureException;
use TourOps\Webhooks\TimestampOutsideToleranceException;
use TourOps\Webhooks\Verifier;

final class VerifierTest extends TestCase
{
    use AssertsRefusal;

    private const NOW = 1790000000;
    private const BODY = '{"id":"evt_1","type":"client.created","created":1790000000,"data":{"name":"Zoë / Ø <&>"}}';

    private string $key;
    private string $oldKey;

    protected function setUp(): void
    {
        $this->key = 'whsec_' . base64_encode(str_repeat('k', 33));
        $this->oldKey = 'whsec_' . base64_encode(str_repeat('o', 33));
    }

    private static function serviceSignature(string $body, array $keys): array
    {
        $parts = ['t=' . self::NOW];
        foreach ($keys as $k) {
            $parts[] = 'v1=' . hash_hmac('sha256', self::NOW . ".{$body}", $k);
        }
        return ['Service-Signature' => implode(',', $parts)];
    }

    private static function standardHeaders(string $body, array $keys, array $pairs = []): array
    {
        $signed = 'evt_1.' . self::NOW . ".{$body}";
        $parts = [];
        foreach ($keys as $k) {
            $parts[] = 'v1,' . base64_encode(hash_hmac('sha256', $signed, base64_decode(substr($k, 6)), true));
        }
        foreach ($pairs as $pair) {
            $parts[] = 'v1a,' . base64_encode(sodium_crypto_sign_detached($signed, sodium_crypto_sign_secretkey($pair)));
        }
        return ['webhook-id' => 'evt_1', 'webhook-timestamp' => (string) self::NOW, 'webhook-signature' => implode(' ', $parts)];
    }

    private static function publicKey(string $pair): string
    {
        return 'whpk_' . base64_encode(sodium_crypto_sign_publickey($pair));
    }

    private function verify(string|array $keys, string $body, array $headers, int $now = self::NOW, int $tolerance = 300): array
    {
        return (new Verifier($keys, $tolerance))->verify($body, $headers, $now);
    }

    public function testServiceSignatureReturnsTheEvent(): void
    {
        $event = $this->verify($this->key, self::BODY, self::serviceSignature(self::BODY, [$this->key]));
        self::assertSame('Zoë / Ø <&>', $event['data']['name']);
    }

    public function testEitherKeyOfARotation(): void
    {
        $both = self::serviceSignature(self::BODY, [$this->key, $this->oldKey]);
        self::assertSame('evt_1', $this->verify([$this->oldKey], self::BODY, $both)['id']);
        self::assertSame('evt_1', $this->verify([$this->key], self::BODY, $both)['id']);
        $newOnly = self::serviceSignature(self::BODY, [$this->key]);
        self::assertThrowsExactly(NoMatchingSignatureException::class, fn () => $this->verify($this->oldKey, self::BODY, $newOnly));
    }

    public function testStandardWebhooksV1(): void
    {
        $headers = self::standardHeaders(self::BODY, [$this->key]);
        self::assertSame('client.created', $this->verify($this->key, self::BODY, $headers)['type']);
        self::assertThrowsExactly(NoMatchingSignatureException::class, fn () => $this->verify($this->oldKey, self::BODY, $headers));
    }

    public function testV1aWithThePublicKeyAlone(): void
    {
        $pair = sodium_crypto_sign_keypair();
        $other = sodium_crypto_sign_keypair();
        $headers = self::standardHeaders(self::BODY, [$this->key], [$pair]);
        self::assertSame('evt_1', $this->verify(self::publicKey($pair), self::BODY, $headers)['id']);
        self::assertThrowsExactly(NoMatchingSignatureException::class, fn () => $this->verify(self::publicKey($other), self::BODY, $headers));
        $hmacOnly = self::standardHeaders(self::BODY, [$this->key]);
        self::assertThrowsExactly(MalformedHeaderException::class, fn () => $this->verify(self::publicKey($pair), self::BODY, $hmacOnly));
    }

    public function testOneByteOfTheBody(): void
    {
        $changed = preg_replace('/created/', 'createe', self::BODY, 1);
        $headers = self::serviceSignature(self::BODY, [$this->key]);
        self::assertThrowsExactly(NoMatchingSignatureException::class, fn () => $this->verify($this->key, $changed, $headers));
    }

    public function testABodyDecodedAndEncodedAgain(): void
    {
        $decoded = json_decode(self::BODY, true);
        $headers = self::serviceSignature(self::BODY, [$this->key]);
        foreach ([json_encode($decoded), json_encode($decoded, JSON_PRETTY_PRINT | JSON_UNESCAPED_SLASHES | JSON_UNESCAPED_UNICODE)] as $again) {
            self::assertThrowsExactly(BodyNotRawException::class, fn () => $this->verify($this->key, $again, $headers));
        }
    }

    public function testTheTimestampOutsideTheTolerance(): void
    {
        $headers = self::serviceSignature(self::BODY, [$this->key]);
        foreach ([self::NOW + 301, self::NOW - 301] as $now) {
            self::assertThrowsExactly(TimestampOutsideToleranceException::class, fn () => $this->verify($this->key, self::BODY, $headers, $now));
        }
        self::assertSame('evt_1', $this->verify($this->key, self::BODY, $headers, self::NOW + 300)['id']);
        self::assertSame('evt_1', $this->verify($this->key, self::BODY, $headers, self::NOW + 900, 900)['id']);
    }

    public function testHeadersMissingOrMalformed(): void
    {
        $cases = [
            [MissingHeaderException::class, ['Content-Type' => 'application/json']],
            [MalformedHeaderException::class, ['Service-Signature' => 't=' . self::NOW]],
            [MalformedHeaderException::class, ['Service-Signature' => 'v1=' . str_repeat('0', 64)]],
        ];
        $withoutId = self::standardHeaders(self::BODY, [$this->key]);
        unset($withoutId['webhook-id']);
        $cases[] = [MissingHeaderException::class, $withoutId];
        foreach ($cases as [$class, $headers]) {
            self::assertThrowsExactly($class, fn () => $this->verify($this->key, self::BODY, $headers));
        }
    }

    public function testKeysOfAnotherKind(): void
    {
        foreach ([[], ['sk_live_123'], ['whpk_short']] as $keys) {
            self::assertThrowsExactly(InvalidKeyException::class, fn () => new Verifier($keys));
        }
    }

    public function testHeadersInAnyCaseAsServerOrAsPsr7Lists(): void
    {
        $signature = self::serviceSignature(self::BODY, [$this->key])['Service-Signature'];
        foreach ([['SERVICE-SIGNATURE' => $signature], ['HTTP_SERVICE_SIGNATURE' => $signature], ['service-signature' => [$signature]]] as $headers) {
            self::assertSame('evt_1', $this->verify($this->key, self::BODY, $headers)['id']);
        }
    }
}
