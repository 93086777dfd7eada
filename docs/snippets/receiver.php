<?php
// A TourOps webhook receiver in PHP: the built-in server and the verifier package (sdk/php).
//   TOUROPS_SIGNING_KEYS=whsec_... php -S 127.0.0.1:4242 receiver.php     (POST /webhooks)
//   TOUROPS_PUBLIC_KEYS=whpk_... php -S 127.0.0.1:4242 receiver.php       (v1a, Ed25519)
// Behind Apache or nginx with PHP-FPM the same code runs as the endpoint's script.
declare(strict_types=1);

// With Composer: require __DIR__ . '/vendor/autoload.php'; here, from a clone of the repository:
require __DIR__ . '/../../sdk/php/autoload.php';

use TourOps\Webhooks\VerificationException;
use TourOps\Webhooks\Verifier;

$keys = array_values(array_filter(array_merge(
    explode(',', (string) getenv('TOUROPS_SIGNING_KEYS')),
    explode(',', (string) getenv('TOUROPS_PUBLIC_KEYS')),
)));

if ($_SERVER['REQUEST_METHOD'] !== 'POST' || parse_url($_SERVER['REQUEST_URI'], PHP_URL_PATH) !== '/webhooks') {
    http_response_code(404);
    return;
}
try {
    // The raw body, before any JSON decoding: the signature covers these bytes.
    $event = (new Verifier($keys))->verify((string) file_get_contents('php://input'), getallheaders());
} catch (VerificationException $error) {
    file_put_contents('php://stderr', 'refused: ' . (new ReflectionClass($error))->getShortName() . ': ' . $error->getMessage() . "\n");
    http_response_code(400);
    return;
}
// Acknowledge at once; do the work after (deduplicate on $event['id']: deliveries can repeat).
http_response_code(204);
file_put_contents('php://stderr', "verified {$event['type']} {$event['id']}\n");
