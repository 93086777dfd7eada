<?php

declare(strict_types=1);

namespace TourOps\Webhooks;

/** A delivery to refuse: answer it with a 400 and do not act on it. */
class VerificationException extends \UnexpectedValueException
{
}
