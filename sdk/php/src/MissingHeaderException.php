<?php

declare(strict_types=1);

namespace TourOps\Webhooks;

/** The delivery lacks the signature headers the keys given verify. */
class MissingHeaderException extends VerificationException
{
}
