<?php

declare(strict_types=1);

namespace RedisRl;

use RuntimeException;
use Throwable;

final class RedisFailure extends RuntimeException
{
    private const UNAVAILABLE_PREFIXES = [
        // The module is missing: a deployment problem, not a bug in the call.
        'ERR unknown command',
        // RL.PSEUDONYM on a server without a secret: configuration again.
        'ERR no secret',
    ];

    private const MISUSE_CODES = ['ERR', 'WRONGTYPE', 'CROSSSLOT'];

    public function __construct(public readonly FailureKind $kind, string $message, ?Throwable $previous = null)
    {
        parent::__construct($message, 0, $previous);
    }

    public static function unavailable(string $message, ?Throwable $previous = null): self
    {
        return new self(FailureKind::Unavailable, $message, $previous);
    }

    /** Sorts a server error reply by whether the request or the deployment is at fault. */
    public static function fromErrorReply(string $reply): self
    {
        if (preg_match("/^ERR unknown command ['`](RL\\.[A-Za-z]+)['`]/i", $reply, $m) === 1) {
            // Redis does not know the command: the module is not loaded there.
            $reply .= " (hint: the redis-rl module is not loaded on this server: add `loadmodule /path/to/libredis_rl.so` to redis.conf, or run MODULE LOAD /path/to/libredis_rl.so)";
        }
        foreach (self::UNAVAILABLE_PREFIXES as $prefix) {
            if (str_starts_with($reply, $prefix)) {
                return new self(FailureKind::Unavailable, $reply);
            }
        }
        $code = strtok($reply, ' ');

        return new self(in_array($code, self::MISUSE_CODES, true) ? FailureKind::Misuse : FailureKind::Unavailable, $reply);
    }
}
