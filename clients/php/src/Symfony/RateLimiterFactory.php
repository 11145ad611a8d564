<?php

declare(strict_types=1);

namespace RedisRl\Symfony;

use RedisRl\Limit;
use RedisRl\RateLimiter;
use Symfony\Component\OptionsResolver\Options;
use Symfony\Component\OptionsResolver\OptionsResolver;
use Symfony\Component\RateLimiter\LimiterInterface;
use Symfony\Component\RateLimiter\Policy\NoLimiter;
use Symfony\Component\RateLimiter\Util\TimeUtil;

/**
 * Symfony RateLimiter 5.4's factory, on the module: the same options and the same
 * create(?string $key), limiters that return Symfony's own RateLimit, and no storage
 * and no lock: each consume() is one atomic command on the Redis thread.
 *
 * | policy           | command        |
 * |------------------|----------------|
 * | `sliding_window` | RL.SLIDEWINDOW: Symfony's window, from the first consume |
 * | `fixed_window`   | RL.COUNTER: Symfony's window, from the first consume |
 * | `token_bucket`   | RL.TOKENBUCKET: `limit` tokens, `rate.amount` back at each whole `rate.interval` |
 * | `sliding_log`    | RL.SLIDELOG (exact; not a Symfony policy) |
 * | `no_limit`       | Symfony's NoLimiter |
 *
 * Keys are `<key_prefix>{<key>}:<id>`: the key given to create() is the hash tag, so
 * the limiters of several factories created for one key can be one RL.ALL
 * (CompoundLimiter), in a cluster too.
 */
final class RateLimiterFactory
{
    /** @var array<string, mixed> */
    private readonly array $config;

    /**
     * @param array<string, mixed> $config Symfony's (id, policy, limit, interval, rate) plus
     *        `key_prefix` (default "rl:") and `shadow` (default false)
     */
    public function __construct(array $config, private readonly RateLimiter $limiter)
    {
        $options = new OptionsResolver();
        $seconds = static function (Options $options, string $interval): int {
            $now = \DateTimeImmutable::createFromFormat('U', (string) time());
            $then = @$now->modify('+' . $interval);
            if ($then === false) {
                throw new \LogicException(sprintf('Cannot parse interval "%s", please use a valid unit as described on https://www.php.net/datetime.formats.relative.', $interval));
            }

            return TimeUtil::dateIntervalToSeconds($now->diff($then));
        };
        $options
            ->define('id')->required()->allowedTypes('string')
            ->define('policy')->required()
                ->allowedValues('token_bucket', 'fixed_window', 'sliding_window', 'sliding_log', 'no_limit')
            ->define('limit')->allowedTypes('int')
            ->define('interval')->allowedTypes('string')->normalize($seconds)
            ->define('rate')->default(static function (OptionsResolver $rate) use ($seconds): void {
                $rate
                    ->define('amount')->allowedTypes('int')->default(1)
                    ->define('interval')->allowedTypes('string')->normalize($seconds);
            })
            ->define('key_prefix')->allowedTypes('string')->default('rl:')
            ->define('shadow')->allowedTypes('bool')->default(false);
        $this->config = $options->resolve($config);
        if ($this->config['policy'] !== 'no_limit') {
            // The limit, interval and rate are checked now, as the module would, so a
            // mistake fails when the factory is built (at container build), not per request.
            $this->limit('probe');
        }
    }

    public function create(?string $key = null): LimiterInterface
    {
        if ($this->config['policy'] === 'no_limit') {
            return new NoLimiter();
        }

        return new ModuleLimiter($this->limiter, [$this->limit($key ?? '')], $this->config['shadow']);
    }

    /**
     * This factory's limit for $key, stored under the hash tag $tag (default: $key), for
     * adapters that put several factories' limits into one RL.ALL.
     *
     * @internal
     */
    public function limit(string $key, ?string $tag = null): Limit
    {
        $c = $this->config;
        $tag ??= $key;
        $redisKey = $c['key_prefix'] . '{' . ($tag === '' ? '_' : $tag) . '}:' . $c['id'] . ($tag === $key ? '' : ':' . $key);
        $limit = $c['limit'] ?? throw new \LogicException("the limiter \"{$c['id']}\" needs a limit");
        if ($c['policy'] === 'token_bucket') {
            $interval = $c['rate']['interval'] ?? throw new \LogicException("the token bucket \"{$c['id']}\" needs rate.interval");

            return Limit::tokenBucket($c['id'], $redisKey, $limit, $interval, $c['rate']['amount']);
        }
        $interval = $c['interval'] ?? throw new \LogicException("the limiter \"{$c['id']}\" needs an interval");

        return match ($c['policy']) {
            'sliding_window' => Limit::slideWindow($c['id'], $redisKey, $limit, $interval),
            'fixed_window' => Limit::counter($c['id'], $redisKey, $limit, $interval),
            'sliding_log' => Limit::slideLog($c['id'], $redisKey, $limit, $interval),
        };
    }

    /** @internal */
    public function rateLimiter(): RateLimiter
    {
        return $this->limiter;
    }

    /** @internal */
    public function shadow(): bool
    {
        return $this->config['shadow'];
    }
}
