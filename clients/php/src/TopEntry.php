<?php

declare(strict_types=1);

namespace RedisRl;

/**
 * One key of RL.TOP's answer: how often a server denied it (docs/top.md). Across a
 * cluster, merge() adds up the primaries' answers.
 */
final readonly class TopEntry
{
    public function __construct(
        /** The limiter's base key, as the caller passed it. */
        public string $key,
        /** Denials counted for it: an upper bound of the true count. */
        public int $denied,
        /** Admitted calls of the key since it entered the summary. */
        public int $admitted,
        /** The true denial count is between denied - error and denied. */
        public int $error,
        /** Unix time in ms of its last denial, on the call's clock. */
        public int $lastDeniedMs,
        /** The command of the last denial: rl.fixed, rl.all, cl.throttle... */
        public string $command,
        /** The algorithm of the limit that denied it last. */
        public string $algorithm,
    ) {
    }

    /**
     * One row of RL.TOP's reply: a field/value list (phpredis speaks RESP2).
     *
     * @throws RedisFailure when the row is not one
     */
    public static function fromReply(mixed $row): self
    {
        $fields = [];
        if (is_array($row) && array_is_list($row) && count($row) % 2 === 0) {
            for ($i = 0; $i < count($row); $i += 2) {
                $fields[(string) $row[$i]] = $row[$i + 1];
            }
        }
        $ints = ['denied', 'admitted', 'error', 'last_denied_ms'];
        foreach (['key', 'command', 'algorithm', ...$ints] as $name) {
            $value = $fields[$name] ?? null;
            if (!(in_array($name, $ints, true) ? is_int($value) : is_string($value))) {
                throw RedisFailure::unavailable('unexpected reply to RL.TOP: ' . json_encode($row));
            }
        }

        return new self(
            $fields['key'],
            $fields['denied'],
            $fields['admitted'],
            $fields['error'],
            $fields['last_denied_ms'],
            $fields['command'],
            $fields['algorithm'],
        );
    }

    /**
     * The servers' answers as one list, worst first, at most $count. A key lives on one
     * primary; after a slot migration it may be on two: its counts add (errors too), and
     * the latest denial's time, command and algorithm are kept.
     *
     * @param list<list<self>> $answers
     * @return list<self>
     */
    public static function merge(array $answers, int $count): array
    {
        /** @var array<string, self> $byKey */
        $byKey = [];
        foreach ($answers as $answer) {
            foreach ($answer as $e) {
                $seen = $byKey[$e->key] ?? null;
                if ($seen === null) {
                    $byKey[$e->key] = $e;
                    continue;
                }
                $latest = $e->lastDeniedMs >= $seen->lastDeniedMs ? $e : $seen;
                $byKey[$e->key] = new self(
                    $e->key,
                    $seen->denied + $e->denied,
                    $seen->admitted + $e->admitted,
                    $seen->error + $e->error,
                    $latest->lastDeniedMs,
                    $latest->command,
                    $latest->algorithm,
                );
            }
        }
        $merged = array_values($byKey);
        // Ties by key, byte for byte (<=> would compare numeric strings as numbers).
        usort($merged, static fn (self $a, self $b) => ($b->denied <=> $a->denied) ?: strcmp($a->key, $b->key));

        return array_slice($merged, 0, $count);
    }
}
