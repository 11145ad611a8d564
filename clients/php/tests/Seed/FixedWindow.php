<?php
declare(strict_types=1);

// The seed has no PHP for its fixed-window script; this is the wrapper one would write
// in the post's style around lua/fixed_window.lua, for the migration test.

final class FixedWindow
{
    private string $sha;

    public function __construct(
        private readonly Redis $redis,
        private readonly int $limit,
        private readonly int $windowSeconds,
    ) {
        $this->sha = $this->redis->script('load', file_get_contents(SEED_LUA_DIR . '/fixed_window.lua'));
    }

    /**
     * @return array{allowed: bool, remaining: int}
     */
    public function check(string $identity): array
    {
        /** @var array{0:int,1:int} $result */
        $result = $this->redis->evalSha(
            $this->sha,
            ["rl:fixed:{$identity}", (string) time(), (string) $this->windowSeconds, (string) $this->limit],
            1,
        );

        return [
            'allowed'   => $result[0] === 1,
            'remaining' => $result[1],
        ];
    }
}
