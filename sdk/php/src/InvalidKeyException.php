<?php

declare(strict_types=1);

namespace TourOps\Webhooks;

/** A key given is neither a signing key (whsec_) nor a public key (whpk_). */
class InvalidKeyException extends VerificationException
{
}
