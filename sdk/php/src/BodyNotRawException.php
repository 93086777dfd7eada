<?php

declare(strict_types=1);

namespace TourOps\Webhooks;

/**
 * No signature matches and the body is not as the service sends it: it was parsed and serialised
 * again. Pass the bytes received (`file_get_contents('php://input')`).
 */
class BodyNotRawException extends NoMatchingSignatureException
{
}
