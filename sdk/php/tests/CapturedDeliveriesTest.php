<?php
// With TOUROPS_WEBHOOK_CASES (a JSON file a test of the service writes from real deliveries: see
// test/verifier-packages.test.ts), each captured case must come to what it says: its event, or
// the one check that refuses it. Skipped, saying so, without the file.
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

final class CapturedDeliveriesTest extends TestCase
{
    use AssertsRefusal;

    private const CHECKS = [
        'InvalidKey' => InvalidKeyException::class,
        'MissingHeader' => MissingHeaderException::class,
        'MalformedHeader' => MalformedHeaderException::class,
        'TimestampOutsideTolerance' => TimestampOutsideToleranceException::class,
        'NoMatchingSignature' => NoMatchingSignatureException::class,
        'BodyNotRaw' => BodyNotRawException::class,
    ];

    /** Each captured case by its name; one null case, skipped, without the file. */
    public static function cases(): array
    {
        $path = getenv('TOUROPS_WEBHOOK_CASES');
        if (!$path) {
            return ['no captured deliveries' => [null]];
        }
        $named = [];
        foreach (json_decode((string) file_get_contents($path), true, 512, JSON_THROW_ON_ERROR) as $case) {
            $named[$case['name']] = [$case];
        }
        return $named === [] ? ['an empty file' => [[]]] : $named;
    }

    /** @dataProvider cases */
    public function testARealDelivery(?array $case): void
    {
        if ($case === null) {
            self::markTestSkipped('TOUROPS_WEBHOOK_CASES is not set: no captured deliveries');
        }
        self::assertNotSame([], $case, 'TOUROPS_WEBHOOK_CASES holds no case');
        $verify = fn (string $body) => (new Verifier($case['keys'], $case['tolerance']))->verify($body, $case['headers'], $case['now']);
        if ($case['expect'] === 'ok') {
            $event = $verify($case['body']);
            self::assertSame([$case['eventId'], $case['eventType']], [$event['id'], $event['type']]);
            // Decoded and encoded again, as a handler that read $request->toArray() first would.
            // A body PHP writes back byte for byte (a thin one: ids only) is still the body signed.
            $again = json_encode(json_decode($case['body'], true));
            if ($again !== $case['body']) {
                self::assertThrowsExactly(BodyNotRawException::class, fn () => $verify($again));
            }
            return;
        }
        self::assertThrowsExactly(self::CHECKS[$case['expect']], fn () => $verify($case['body']));
    }
}
