<?php

declare(strict_types=1);

namespace RedisRl;

/**
 * What answers a limiter call: the module's RL.* commands, or the Lua scripts with the
 * module's contract (same arguments, replies, errors and keys) on a server that cannot
 * load the module.
 */
enum Backend: string
{
    /** The module where it is loaded, else the scripts; decided once per connection. */
    case Auto = 'auto';
    /** Only the RL.* commands: a server without the module fails by the failure policy. */
    case Module = 'module';
    /** Only the scripts, whether the module is loaded or not. */
    case Scripts = 'scripts';

    public static function named(string $name): self
    {
        return self::tryFrom($name)
            ?? throw new \InvalidArgumentException("backend must be 'auto', 'module' or 'scripts', got '{$name}'");
    }
}
