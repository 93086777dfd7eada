<?php
// For a project without Composer: require this file. With Composer, its autoloader finds the
// classes by composer.json's PSR-4 map instead.
spl_autoload_register(static function (string $class): void {
    $prefix = 'TourOps\\Webhooks\\';
    if (str_starts_with($class, $prefix)) {
        require __DIR__ . '/src/' . str_replace('\\', '/', substr($class, strlen($prefix))) . '.php';
    }
});
