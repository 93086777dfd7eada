<?php

declare(strict_types=1);

namespace TourOps\Webhooks;

/** The signed timestamp is further from now than the tolerance: a replay, or a skewed clock. */
class TimestampOutsideToleranceException extends VerificationException
{
}
