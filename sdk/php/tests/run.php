<?php
// php tests/run.php (in sdk/php): prints a line per check, exits 1 if any failed. The first
// checks sign as the service does, with keys made here; with TOUROPS_WEBHOOK_CASES (a JSON file a
// test of the service writes from real deliveries: see test/verifier-packages.test.ts) every
// captured case runs too.
declare(strict_types=1);

require __DIR__ . '/../autoload.php';

use TourOps\Webhooks\BodyNotRawException;
use TourOps\Webhooks\InvalidKeyException;
use TourOps\Webhooks\MalformedHeaderException;
use TourOps\Webhooks\MissingHeaderException;
use TourOps\Webhooks\NoMatchingSignatureException;
use TourOps\Webhooks\TimestampOutsideToleranceException;
use TourOps\Webhooks\Verifier;

const NOW = 1790000000;
$key = 'whsec_' . base64_encode(str_repeat('k', 33));
$oldKey = 'whsec_' . base64_encode(str_repeat('o', 33));
$body = '{"id":"evt_1","type":"client.created","created":' . NOW . ',"data":{"name":"Zoë / Ø <&>"}}';

$failed = 0;
$count = 0;
function check(string $name, callable $test): void
{
    global $failed, $count;
    $count++;
    try {
        $test();
        echo "ok {$count} - {$name}\n";
    } catch (Throwable $error) {
        $failed++;
        echo "not ok {$count} - {$name}: " . get_class($error) . ': ' . $error->getMessage() . "\n";
    }
}

function same(mixed $actual, mixed $expected): void
{
    if ($actual !== $expected) {
        throw new LogicException('got ' . var_export($actual, true) . ', want ' . var_export($expected, true));
    }
}

/** The call must throw exactly $class (a subclass is another check). */
function throwsExactly(string $class, callable $call): void
{
    try {
        $call();
    } catch (Throwable $error) {
        if (get_class($error) !== $class) {
            throw new LogicException('threw ' . get_class($error) . " ({$error->getMessage()}), want {$class}");
        }
        return;
    }
    throw new LogicException("did not throw {$class}");
}

function serviceSignature(string $body, array $keys): array
{
    $parts = ['t=' . NOW];
    foreach ($keys as $k) {
        $parts[] = 'v1=' . hash_hmac('sha256', NOW . ".{$body}", $k);
    }
    return ['Service-Signature' => implode(',', $parts)];
}

function standardHeaders(string $body, array $keys, array $pairs = []): array
{
    $signed = 'evt_1.' . NOW . ".{$body}";
    $parts = [];
    foreach ($keys as $k) {
        $parts[] = 'v1,' . base64_encode(hash_hmac('sha256', $signed, base64_decode(substr($k, 6)), true));
    }
    foreach ($pairs as $pair) {
        $parts[] = 'v1a,' . base64_encode(sodium_crypto_sign_detached($signed, sodium_crypto_sign_secretkey($pair)));
    }
    return ['webhook-id' => 'evt_1', 'webhook-timestamp' => (string) NOW, 'webhook-signature' => implode(' ', $parts)];
}

function publicKey(string $pair): string
{
    return 'whpk_' . base64_encode(sodium_crypto_sign_publickey($pair));
}

check('Service-Signature returns the event', function () use ($key, $body) {
    $event = (new Verifier($key))->verify($body, serviceSignature($body, [$key]), NOW);
    same($event['data']['name'], 'Zoë / Ø <&>');
});

check('either key of a rotation', function () use ($key, $oldKey, $body) {
    $both = serviceSignature($body, [$key, $oldKey]);
    same((new Verifier([$oldKey]))->verify($body, $both, NOW)['id'], 'evt_1');
    same((new Verifier([$key]))->verify($body, $both, NOW)['id'], 'evt_1');
    throwsExactly(NoMatchingSignatureException::class, fn () => (new Verifier($oldKey))->verify($body, serviceSignature($body, [$key]), NOW));
});

check('Standard Webhooks v1', function () use ($key, $oldKey, $body) {
    $headers = standardHeaders($body, [$key]);
    same((new Verifier($key))->verify($body, $headers, NOW)['type'], 'client.created');
    throwsExactly(NoMatchingSignatureException::class, fn () => (new Verifier($oldKey))->verify($body, $headers, NOW));
});

check('v1a with the public key alone', function () use ($key, $body) {
    $pair = sodium_crypto_sign_keypair();
    $other = sodium_crypto_sign_keypair();
    $headers = standardHeaders($body, [$key], [$pair]);
    same((new Verifier(publicKey($pair)))->verify($body, $headers, NOW)['id'], 'evt_1');
    throwsExactly(NoMatchingSignatureException::class, fn () => (new Verifier(publicKey($other)))->verify($body, $headers, NOW));
    throwsExactly(MalformedHeaderException::class, fn () => (new Verifier(publicKey($pair)))->verify($body, standardHeaders($body, [$key]), NOW));
});

check('one byte of the body', function () use ($key, $body) {
    $changed = preg_replace('/created/', 'createe', $body, 1);
    throwsExactly(NoMatchingSignatureException::class, fn () => (new Verifier($key))->verify($changed, serviceSignature($body, [$key]), NOW));
});

check('a body decoded and encoded again', function () use ($key, $body) {
    foreach ([json_encode(json_decode($body, true)), json_encode(json_decode($body, true), JSON_PRETTY_PRINT | JSON_UNESCAPED_SLASHES | JSON_UNESCAPED_UNICODE)] as $again) {
        throwsExactly(BodyNotRawException::class, fn () => (new Verifier($key))->verify($again, serviceSignature($body, [$key]), NOW));
    }
});

check('the timestamp outside the tolerance', function () use ($key, $body) {
    $headers = serviceSignature($body, [$key]);
    foreach ([NOW + 301, NOW - 301] as $now) {
        throwsExactly(TimestampOutsideToleranceException::class, fn () => (new Verifier($key))->verify($body, $headers, $now));
    }
    same((new Verifier($key))->verify($body, $headers, NOW + 300)['id'], 'evt_1');
    same((new Verifier($key, 900))->verify($body, $headers, NOW + 900)['id'], 'evt_1');
});

check('headers missing or malformed', function () use ($key, $body) {
    $verifier = new Verifier($key);
    throwsExactly(MissingHeaderException::class, fn () => $verifier->verify($body, ['Content-Type' => 'application/json'], NOW));
    throwsExactly(MalformedHeaderException::class, fn () => $verifier->verify($body, ['Service-Signature' => 't=' . NOW], NOW));
    throwsExactly(MalformedHeaderException::class, fn () => $verifier->verify($body, ['Service-Signature' => 'v1=' . str_repeat('0', 64)], NOW));
    $headers = standardHeaders($body, [$key]);
    unset($headers['webhook-id']);
    throwsExactly(MissingHeaderException::class, fn () => $verifier->verify($body, $headers, NOW));
});

check('keys of another kind', function () {
    foreach ([[], ['sk_live_123'], ['whpk_short']] as $keys) {
        throwsExactly(InvalidKeyException::class, fn () => new Verifier($keys));
    }
});

check('headers in any case, as $_SERVER, or as PSR-7 lists', function () use ($key, $body) {
    $signature = serviceSignature($body, [$key])['Service-Signature'];
    foreach ([['SERVICE-SIGNATURE' => $signature], ['HTTP_SERVICE_SIGNATURE' => $signature], ['service-signature' => [$signature]]] as $headers) {
        same((new Verifier($key))->verify($body, $headers, NOW)['id'], 'evt_1');
    }
});

$checks = [
    'InvalidKey' => InvalidKeyException::class,
    'MissingHeader' => MissingHeaderException::class,
    'MalformedHeader' => MalformedHeaderException::class,
    'TimestampOutsideTolerance' => TimestampOutsideToleranceException::class,
    'NoMatchingSignature' => NoMatchingSignatureException::class,
    'BodyNotRaw' => BodyNotRawException::class,
];
$path = getenv('TOUROPS_WEBHOOK_CASES');
$cases = $path ? json_decode((string) file_get_contents($path), true, 512, JSON_THROW_ON_ERROR) : [];
if ($path && $cases === []) {
    echo "not ok - TOUROPS_WEBHOOK_CASES holds no case\n";
    $failed++;
}
foreach ($cases as $case) {
    check("real delivery: {$case['name']}", function () use ($case, $checks) {
        $verify = fn (string $body) => (new Verifier($case['keys'], $case['tolerance']))->verify($body, $case['headers'], $case['now']);
        if ($case['expect'] === 'ok') {
            $event = $verify($case['body']);
            same([$event['id'], $event['type']], [$case['eventId'], $case['eventType']]);
            // Decoded and encoded again, as a handler that read $request->toArray() first would.
            $again = json_encode(json_decode($case['body'], true));
            throwsExactly(BodyNotRawException::class, fn () => $verify($again));
            return;
        }
        throwsExactly($checks[$case['expect']], fn () => $verify($case['body']));
    });
}

echo $failed === 0 ? "# {$count} passed\n" : "# {$failed} of {$count} failed\n";
exit($failed === 0 ? 0 : 1);
