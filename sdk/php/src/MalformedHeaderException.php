<?php

declare(strict_types=1);

namespace TourOps\Webhooks;

/** A signature header is there but does not hold what it must (t, a v1...). */
class MalformedHeaderException extends VerificationException
{
}
