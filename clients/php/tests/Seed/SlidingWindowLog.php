<?php
declare(strict_types=1);

// The seed post's wrapper, as published, except for where it finds the script: the
// repository's lua/ folder instead of __DIR__.

final class SlidingWindowLog
{
    private string $sha;

    public function __construct(
        private readonly Redis $redis,
        private readonly int $limit,
        private readonly int $windowSeconds,
    ) {
        $script = file_get_contents(SEED_LUA_DIR . '/sliding_window_log.lua');
        $this->sha = $this->redis->script('load', $script);
    }

    /**
     * @return array{allowed: bool, remaining: int}
     */
    public function check(string $identity): array
    {
        $nowMicros = (int) (microtime(true) * 1_000_000);
        $windowMicros = $this->windowSeconds * 1_000_000;
        // Unique member: timestamp + random suffix avoids score collisions
        $member = $nowMicros . ':' . bin2hex(random_bytes(4));

        /** @var array{0:int,1:int} $result */
        $result = $this->redis->evalSha(
            $this->sha,
            [
                "rl:log:{$identity}",
                (string) $nowMicros,
                (string) $windowMicros,
                (string) $this->limit,
                $member,
            ],
            1, // number of KEYS
        );

        return [
            'allowed'   => $result[0] === 1,
            'remaining' => $result[1],
        ];
    }
}
