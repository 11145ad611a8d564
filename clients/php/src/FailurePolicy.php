<?php

declare(strict_types=1);

namespace RedisRl;

/**
 * What a request gets when Redis cannot decide (refused, timed out, lost connection,
 * an error reply such as the module not being loaded or NOPERM). There is no default:
 * the choice belongs to whoever runs the service.
 */
enum FailurePolicy
{
    /** Admit: a Redis blip must not become an outage (another tier still limits). */
    case Open;
    /** Refuse: nothing may pass unlimited. */
    case Closed;

    /** "open" or "closed", for configuration files that cannot hold an enum. */
    public static function named(string $name): self
    {
        return match (strtolower($name)) {
            'open' => self::Open,
            'closed' => self::Closed,
            default => throw new \InvalidArgumentException("failure policy must be 'open' or 'closed', got '{$name}'"),
        };
    }
}
