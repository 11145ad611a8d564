<?php
declare(strict_types=1);

// The seed post's wrapper, as published, except for where it finds the script: the
// repository's lua/ folder instead of __DIR__.

final class SlidingWindowCounter
{
    private string $sha;

    public function __construct(
        private readonly Redis $redis,
        private readonly int $limit,
        private readonly int $windowSeconds,
    ) {
        $script = file_get_contents(SEED_LUA_DIR . '/sliding_window_counter.lua');
        $this->sha = $this->redis->script('load', $script);
    }

    /**
     * @return array{allowed: bool, remaining: int}
     */
    public function check(string $identity): array
    {
        $now = microtime(true);
        $windowIndex = (int) floor($now / $this->windowSeconds);
        $elapsed = ($now - ($windowIndex * $this->windowSeconds)) / $this->windowSeconds;

        $currKey = "rl:cnt:{$identity}:{$windowIndex}";
        $prevKey = "rl:cnt:{$identity}:" . ($windowIndex - 1);

        /** @var array{0:int,1:int} $result */
        $result = $this->redis->evalSha(
            $this->sha,
            [$currKey, $prevKey, (string) $this->limit, (string) $elapsed, (string) $this->windowSeconds],
            2, // two KEYS
        );

        return [
            'allowed'   => $result[0] === 1,
            'remaining' => max(0, $result[1]),
        ];
    }
}
