<?php

declare(strict_types=1);

namespace RedisRl;

use Closure;
use InvalidArgumentException;
use Psr\Log\LoggerInterface;
use RedisRl\Connection\Connection;
use RedisRl\Metrics\Collector;

/**
 * The module's commands as typed calls. Every decision comes from the server (or, opt-in,
 * from a denial the server gave that the deny cache repeats); the kit limits nothing itself.
 *
 * One limit is sent as its own command (RL.FIXED, RL.GCRA, ...); several as one RL.ALL,
 * admitted only if every limit admits it, spending nothing otherwise.
 */
final class RateLimiter
{
    /** @var Closure(string, string, array<string, mixed>): void */
    private readonly Closure $log;

    /** Requests that shadow mode let through although the server denied them. */
    private int $shadowDenials = 0;

    /**
     * Auto, on a server without the module: how often (kit time, µs) the next call asks
     * the module again, so a module loaded later, or a failover to a node that has it,
     * is used without an app restart. phpredis reconnects silently, so a new connection
     * cannot always be seen; a failed call also forgets the answer.
     */
    public const RECHECK_US = 60_000_000;

    /** Auto: what this connection answered with (null: not known yet). */
    private ?Backend $detected = null;
    private int $detectedAt = 0;

    /**
     * @param LoggerInterface|Closure(string $level, string $message, array<string, mixed> $context): void|null $logger
     *        where failures go; null writes them with error_log(), never nowhere
     * @param ?Clock $clock null: the server's clock decides; a Clock: its time is sent as NOW
     * @param Backend $backend what decides: the module, the scripts, or (auto) the module
     *        where the server has it and the scripts where it does not
     * @param ?string $secret the module's RL_SECRET, for pseudonym() on the scripts backend
     *        (Redis Lua has no SHA-256, so the kit computes the same HMAC itself)
     * @param ?Collector $metrics null: no metrics; a Metrics\Registry (or your Collector):
     *        every decision counted and every call timed (docs/metrics.md)
     */
    public function __construct(
        private readonly Connection $redis,
        private readonly FailurePolicy $onFailure,
        LoggerInterface|Closure|null $logger = null,
        private readonly ?Clock $clock = null,
        private readonly ?DenyCache $denyCache = null,
        private readonly int $closedRetryAfterMs = 1000,
        private readonly Backend $backend = Backend::Auto,
        #[\SensitiveParameter] private readonly ?string $secret = null,
        private readonly ?Collector $metrics = null,
    ) {
        $this->log = match (true) {
            $logger instanceof LoggerInterface => $logger->log(...),
            $logger instanceof Closure => $logger,
            default => static function (string $level, string $message, array $context): void {
                error_log("[{$level}] " . str_replace('{error}', (string) $context['error'], $message));
            },
        };
    }

    public function hit(Limit ...$limits): Decision
    {
        return $this->decide(array_values($limits), Mode::Hit);
    }

    public function peek(Limit ...$limits): Decision
    {
        return $this->decide(array_values($limits), Mode::Peek);
    }

    public function refund(Limit ...$limits): Decision
    {
        return $this->decide(array_values($limits), Mode::Refund);
    }

    public function reset(Limit ...$limits): Decision
    {
        return $this->decide(array_values($limits), Mode::Reset);
    }

    /**
     * RL.CONCURRENCY ACQUIRE: takes (or renews, the call is idempotent) the lease $leaseId
     * on every concurrency limit among $limits; with rate limits beside it, one RL.ALL
     * with LEASE: a denied rate limit takes no lease, a full concurrency limit spends no
     * rate budget.
     */
    public function acquire(string $leaseId, Limit ...$limits): Decision
    {
        return $this->decide(array_values($limits), Mode::Hit, $leaseId);
    }

    /** RL.CONCURRENCY RELEASE of $leaseId on one concurrency limit (an unknown id is no error). */
    public function release(string $leaseId, Limit $concurrency): Decision
    {
        return $this->decide([self::concurrencyOnly($concurrency)], Mode::Refund, $leaseId);
    }

    /** RL.CONCURRENCY HEARTBEAT: keeps a held lease alive for another ttl; denied if it is gone. */
    public function heartbeat(string $leaseId, Limit $concurrency): Decision
    {
        return $this->decide([self::concurrencyOnly($concurrency)], Mode::Heartbeat, $leaseId);
    }

    /**
     * RL.THROTTLE (redis-cell's CL.THROTTLE): $count per $period seconds, $maxBurst + 1 at
     * once; quantity 0 reports without spending. The failure policy answers when Redis
     * cannot.
     *
     * @throws RedisFailure of kind Misuse
     */
    public function throttle(string $key, int $maxBurst, int $count, int $period, int $quantity = 1): ThrottleDecision
    {
        $args = ['RL.THROTTLE', $key, (string) $maxBurst, (string) $count, (string) $period, (string) $quantity];
        if ($this->clock !== null) {
            array_push($args, 'NOW', (string) $this->now());
        }
        $name = $quantity > 0 ? ["throttle:{$count}/{$period}s"] : []; // quantity 0 is a peek
        $start = hrtime(true);
        try {
            $reply = $this->send([$key], $args);
            if (!is_array($reply) || !array_is_list($reply) || count($reply) !== 5
                || array_filter($reply, 'is_int') !== $reply) {
                throw RedisFailure::unavailable('unexpected reply to RL.THROTTLE: ' . json_encode($reply));
            }

            $decision = ThrottleDecision::fromReply($reply);
            $this->measured($name, $start, $decision->allowed ? 'allowed' : 'denied');

            return $decision;
        } catch (RedisFailure $failure) {
            $this->measured($failure->kind === FailureKind::Misuse ? [] : $name, $start, $this->failureOutcome());
            $policy = $this->failed($failure);

            return new ThrottleDecision($policy->allowed, $maxBurst + 1, 0, $policy->retryAfterSeconds(), 0, $failure);
        }
    }

    /**
     * @param list<Limit> $limits
     * @param ?string $leaseId the lease for the concurrency limits among $limits
     * @param ?int $at decide at this unix time in µs (sent as NOW) instead of now: a
     *        reservation in the future (Symfony's reserve()) is a spend at its instant
     * @param bool $shadow the caller lets a denial through (shadow mode): counted as
     *        shadow_denied in the metrics; the decision itself is unchanged
     * @throws RedisFailure of kind Misuse: the server refused the call itself
     */
    public function decide(array $limits, Mode $mode, ?string $leaseId = null, ?int $at = null, bool $shadow = false): Decision
    {
        if ($limits === []) {
            throw new InvalidArgumentException('at least one limit is needed');
        }
        $leased = array_filter($limits, static fn (Limit $l) => $l->algorithm === Algorithm::Concurrency) !== [];
        if ($leaseId === '') {
            throw new InvalidArgumentException('a lease id must not be empty');
        }
        if (count($limits) > 16) {
            throw new InvalidArgumentException('one call checks at most 16 limits (RL.ALL), got ' . count($limits));
        }
        foreach (count($limits) > 1 ? $limits : [] as $limit) {
            if (($options = $limit->counterOptions()) !== []) {
                throw new InvalidArgumentException("limit '{$limit->name}': " . implode(' and ', $options) . (count($options) > 1 ? ' are' : ' is') . " RL.COUNTER's alone, refused in RL.ALL (a denied RL.ALL spends nothing): check that limit on its own");
            }
        }
        if ($leased && $leaseId === null && in_array($mode, [Mode::Hit, Mode::Refund, Mode::Heartbeat], true)) {
            throw new InvalidArgumentException('a concurrency limit needs a lease id: use acquire()/release()');
        }
        $now = $at ?? $this->now();
        if (count($limits) === 1 && $leased) {
            $args = ['RL.CONCURRENCY', ...$limits[0]->arguments(), $mode->leaseWord()];
            if (in_array($mode, [Mode::Hit, Mode::Refund, Mode::Heartbeat], true)) {
                $args[] = (string) $leaseId;
            }
        } elseif (count($limits) === 1) {
            $args = [$limits[0]->algorithm->command(), ...$limits[0]->arguments()];
        } else {
            $args = ['RL.ALL', (string) count($limits), ...array_merge(...array_map(
                static fn (Limit $l) => [$l->algorithm->value, ...$l->arguments()],
                $limits,
            ))];
        }
        $signature = implode("\0", $args);

        // A lease can come back early (a RELEASE elsewhere): a cached denial could be wrong.
        // A counter that counts denials (COUNTALL, ESCALATE; always alone, as RL.ALL refuses
        // them) must see each one: a denial repeated here would neither be counted nor
        // (RENEW, ESCALATE) move the window's end.
        $cacheable = $mode === Mode::Hit && !$leased && $at === null
            && !$limits[0]->countAll && !$limits[0]->escalate;
        // The metrics count admissions (a hit, an acquire): not PEEK, REFUND, RESET, RELEASE
        // or HEARTBEAT, which would count one request twice.
        $names = $mode === Mode::Hit ? array_map(static fn (Limit $l) => $l->name, $limits) : [];
        if ($cacheable && ($cached = $this->denyCache?->lookup($signature, $now)) !== null) {
            $this->count($names, 'cache_denied');

            return $cached;
        }
        if ($mode === Mode::Refund || $mode === Mode::Reset) {
            $this->denyCache?->clear();
        }
        if ($this->clock !== null || $at !== null) {
            array_push($args, 'NOW', (string) $now);
        }
        if (count($limits) > 1 && $leased && $leaseId !== null) {
            array_push($args, 'LEASE', $leaseId);
        }
        if (!($leased && count($limits) === 1) && $mode->option() !== null) {
            $args[] = $mode->option();
        }

        $start = hrtime(true);
        try {
            // RL.ALL's keys share one slot (the server insists), so the first routes it.
            $decision = $this->parse($limits, $this->send(array_map(static fn (Limit $l) => $l->key, $limits), $args));
        } catch (RedisFailure $failure) {
            // A caller's mistake is raised, not a decision: neither counted nor timed.
            $this->measured($failure->kind === FailureKind::Misuse ? [] : $names, $start, $this->failureOutcome());

            return $this->failed($failure);
        }
        $this->measured($names, $start, $decision->allowed ? 'allowed' : ($shadow ? 'shadow_denied' : 'denied'));
        if ($cacheable) {
            $this->denyCache?->remember($signature, $decision, $now);
        }

        return $decision;
    }

    /**
     * RL.PSEUDONYM: the daily-rotating pseudonym of an identity (an IP address is first
     * canonicalised), as the seed's rateLimitIdentity() computes it.
     *
     * @return ?string null when Redis could not answer (reported to the logger)
     * @throws RedisFailure of kind Misuse
     */
    public function pseudonym(string $identity, ?string $scope = null, ?int $prefix6 = null): ?string
    {
        $args = ['RL.PSEUDONYM', $identity];
        if ($scope !== null) {
            $args[] = $scope;
        }
        if ($prefix6 !== null) {
            array_push($args, 'PREFIX6', (string) $prefix6);
        }
        if ($this->clock !== null) {
            array_push($args, 'NOW', (string) $this->now());
        }
        try {
            $reply = $this->send([], $args, fn () => $this->localPseudonym($identity, $scope, $prefix6));
            if (!is_string($reply)) {
                throw RedisFailure::unavailable('unexpected reply to RL.PSEUDONYM: ' . get_debug_type($reply));
            }

            return $reply;
        } catch (RedisFailure $failure) {
            $this->failed($failure);

            return null;
        }
    }

    /**
     * RL.TOP: the keys the server denied most, worst first (docs/top.md). On a cluster
     * every primary is asked and their answers merged (a key's counts add if it is on
     * two, after a slot migration), then cut to $count. Not a decision: the failure
     * policy does not apply, every failure is thrown.
     *
     * @param ?string $algorithm only entries whose last denial came from it (any case)
     * @param bool $reset empty the servers' summaries after reading them
     * @return list<TopEntry>
     * @throws RedisFailure also on the scripts backend: RL.TOP needs the module
     */
    public function top(int $count = 10, ?string $algorithm = null, bool $reset = false): array
    {
        if ($count < 1) {
            throw new InvalidArgumentException("top(): count must be a positive integer, got {$count}");
        }
        if ($this->backend === Backend::Scripts) {
            throw RedisFailure::unavailable('RL.TOP needs the redis-rl module: the scripts backend counts no denials (the module keeps the summary in each server); load the module and use the module or auto backend');
        }
        $args = ['RL.TOP', 'COUNT', (string) $count];
        if ($algorithm !== null) {
            array_push($args, 'ALGORITHM', $algorithm);
        }
        if ($reset) {
            $args[] = 'RESET';
        }
        $answers = array_map(static function (mixed $reply): array {
            if (!is_array($reply) || !array_is_list($reply)) {
                throw RedisFailure::unavailable('unexpected reply to RL.TOP: ' . json_encode($reply));
            }

            return array_map(TopEntry::fromReply(...), $reply);
        }, $this->redis->everyPrimary(...$args));

        return TopEntry::merge($answers, $count);
    }

    /**
     * What the failure policy answers for a request Redis could not decide. It does not
     * log: for callers that already reported why (the middleware when no identity came).
     */
    public function policyDecision(RedisFailure $why): Decision
    {
        return $this->onFailure === FailurePolicy::Open
            ? new Decision(true, 0, 0, 0, [], $why)
            : new Decision(false, 0, $this->closedRetryAfterMs, 0, [], $why);
    }

    /**
     * Shadow mode, for every middleware and adapter: whether to let $decision's request
     * through. A real denial is let through anyway when $shadow is set, reported to the
     * logger (at notice) and counted; the decision itself stays as the server gave it, so
     * the headers still describe the real state. A failure is never shadowed: the failure
     * policy already decided what an outage means.
     */
    public function admits(Decision $decision, bool $shadow, string $where = 'request'): bool
    {
        if ($decision->allowed || !$shadow || $decision->failure !== null) {
            return $decision->allowed;
        }
        $this->shadowDenials++;
        $names = implode(', ', array_map(static fn (LimitDecision $d) => $d->limit->name, array_filter(
            $decision->limits,
            static fn (LimitDecision $d) => !$d->allowed,
        )));
        ($this->log)('notice', "redis-rl: shadow mode, would have denied {$where} ({$names}): {error}", [
            'error' => "retry after {$decision->retryAfterMs} ms",
            'where' => $where,
            'limits' => $names,
            'shadow' => true,
            'retry_after_ms' => $decision->retryAfterMs,
        ]);

        return true;
    }

    /** How many denials shadow mode let through in this process (each was also logged). */
    public function shadowDenials(): int
    {
        return $this->shadowDenials;
    }

    /** The kit's time in unix µs: the injected clock's, else this machine's. */
    public function now(): int
    {
        return ($this->clock ?? new SystemClock())->nowMicros();
    }

    /**
     * The backend that answers (or, before the first answer, would): what the metrics'
     * `backend` label says.
     */
    public function backend(): Backend
    {
        return $this->backend === Backend::Auto ? ($this->detected ?? Backend::Module) : $this->backend;
    }

    /**
     * Sends a module command line, or runs its script. Auto tries the command until the
     * connection has answered once: an `unknown command` reply marks it as scripts and
     * the same call is run on them at once, so no decision is lost. After a failure, and
     * every RECHECK_US on the scripts, the next call (maybe on a new connection, a failover
     * node, a server that has loaded the module since) asks the module again.
     *
     * @param list<string> $keys the command's keys, in order
     * @param list<string> $args the module command line
     * @param ?Closure(): mixed $local what answers instead of a script (RL.PSEUDONYM)
     */
    private function send(array $keys, array $args, ?Closure $local = null): mixed
    {
        $scripts = fn () => $local !== null ? $local() : Scripts::run($this->redis, $keys, ...$args);
        try {
            $recheck = $this->detected === Backend::Scripts && $this->now() - $this->detectedAt >= self::RECHECK_US;
            if ($this->backend() === Backend::Scripts && !$recheck) {
                return $scripts();
            }
            try {
                $reply = $this->redis->command($keys[0] ?? null, ...$args);
            } catch (RedisFailure $failure) {
                if ($this->backend !== Backend::Auto || !str_starts_with($failure->getMessage(), 'ERR unknown command')) {
                    throw $failure;
                }
                [$this->detected, $this->detectedAt] = [Backend::Scripts, $this->now()];

                return $scripts();
            }
            if ($this->backend === Backend::Auto) {
                $this->detected = Backend::Module;
            }

            return $reply;
        } catch (RedisFailure $failure) {
            if ($failure->kind === FailureKind::Unavailable && $this->detected === Backend::Scripts) {
                // The next call asks the module first (the label stays the last backend used).
                $this->detectedAt = $this->now() - self::RECHECK_US;
            }
            throw $failure;
        }
    }

    /** RL.PSEUDONYM computed here, exactly as the module does, from the secret the app gave. */
    private function localPseudonym(string $identity, ?string $scope, ?int $prefix6): string
    {
        if ($this->secret === null) {
            throw RedisFailure::unavailable('RL.PSEUDONYM needs the module, or the secret: Redis Lua has no SHA-256, so on the scripts backend the kit computes pseudonyms itself; pass the server\'s RL_SECRET as the RateLimiter\'s secret');
        }
        if ($prefix6 !== null && ($prefix6 < 1 || $prefix6 > 128)) {
            throw new RedisFailure(FailureKind::Misuse, 'ERR PREFIX6 must be a prefix length from 1 to 128');
        }

        return Pseudonym::of($this->secret, $identity, $scope, $prefix6, $this->now());
    }

    private function failureOutcome(): string
    {
        return $this->onFailure === FailurePolicy::Open ? 'failure_open' : 'failure_closed';
    }

    /** @param list<string> $names */
    private function count(array $names, string $outcome): void
    {
        foreach ($names as $name) {
            $this->metrics?->countDecision($name, $outcome, $this->backend()->value);
        }
    }

    /** @param list<string> $names the call's limits; [] when it was a caller's mistake */
    private function measured(array $names, int $start, string $outcome): void
    {
        if ($this->metrics === null) {
            return;
        }
        $seconds = (hrtime(true) - $start) / 1e9;
        foreach ($names as $name) {
            $this->metrics->observeCall($name, $seconds);
        }
        $this->count($names, $outcome);
    }

    /** @param list<Limit> $limits */
    private function parse(array $limits, mixed $reply): Decision
    {
        $single = count($limits) === 1;
        $valid = is_array($reply) && self::isQuad($reply) && ($single
            ? count($reply) === 4
            : count($reply) === 5 && is_array($reply[4]) && count($reply[4]) === count($limits)
                && array_filter($reply[4], static fn ($r) => !is_array($r) || !self::isQuad($r)) === []);
        if (!$valid) {
            throw RedisFailure::unavailable('unexpected reply: ' . json_encode($reply));
        }

        return $single ? Decision::single($limits[0], $reply) : Decision::all($limits, $reply);
    }

    /** @param array<mixed> $reply */
    private static function isQuad(array $reply): bool
    {
        return array_is_list($reply) && count($reply) >= 4
            && is_int($reply[0]) && is_int($reply[1]) && is_int($reply[2]) && is_int($reply[3]);
    }

    private static function concurrencyOnly(Limit $limit): Limit
    {
        if ($limit->algorithm !== Algorithm::Concurrency) {
            throw new InvalidArgumentException("'{$limit->name}' is not a concurrency limit");
        }

        return $limit;
    }

    private function failed(RedisFailure $failure): Decision
    {
        $context = ['error' => $failure->getMessage(), 'exception' => $failure];
        if ($failure->kind === FailureKind::Misuse) {
            // A bug in the call: loud, whatever the policy, as it would never heal.
            ($this->log)('error', 'redis-rl: the server refused the rate-limit call: {error}', $context);
            throw $failure;
        }
        ($this->log)(
            'warning',
            'redis-rl: Redis could not decide, failing '
                . ($this->onFailure === FailurePolicy::Open ? 'open' : 'closed') . ': {error}',
            $context,
        );

        return $this->policyDecision($failure);
    }
}
