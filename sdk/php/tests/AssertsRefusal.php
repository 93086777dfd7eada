<?php
// The assertion both test classes make of a refusal.
declare(strict_types=1);

namespace TourOps\Webhooks\Tests;

trait AssertsRefusal
{
    /** The call must throw exactly $class (a subclass is another check). */
    private static function assertThrowsExactly(string $class, callable $call): void
    {
        try {
            $call();
        } catch (\Throwable $error) {
            self::assertSame($class, get_class($error), $error->getMessage());
            return;
        }
        self::fail("did not throw {$class}");
    }
}
