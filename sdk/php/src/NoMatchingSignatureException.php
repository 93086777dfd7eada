<?php

declare(strict_types=1);

namespace TourOps\Webhooks;

/** No signature of the delivery was made with any of the keys given, over this body. */
class NoMatchingSignatureException extends VerificationException
{
}
