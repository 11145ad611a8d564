<?php

declare(strict_types=1);

namespace RedisRl;

/**
 * RL.PSEUDONYM's output computed in PHP, byte for byte: HMAC-SHA256(secret,
 * canonical identity "|" UTC day), its first 12 bytes in hex, then ":" scope. An IP
 * address is canonicalised first (an IPv4-mapped IPv6 address is its IPv4 address;
 * IPv6 in RFC 5952 form, optionally reduced to its PREFIX6 network as "net/bits").
 */
final class Pseudonym
{
    public static function of(#[\SensitiveParameter] string $secret, string $identity, ?string $scope, ?int $prefix6, int $nowMicros): string
    {
        $day = gmdate('Y-m-d', intdiv($nowMicros, 1_000_000));
        $hex = substr(hash_hmac('sha256', self::canonical($identity, $prefix6) . '|' . $day, $secret), 0, 24);

        return $scope === null ? $hex : "{$hex}:{$scope}";
    }

    public static function canonical(string $identity, ?int $prefix6): string
    {
        // inet_pton alone would take what Rust's parser refuses (a scope id is refused by both).
        $binary = preg_match('/^[0-9A-Fa-f:.]+$/', $identity) === 1 ? @inet_pton($identity) : false;
        if ($binary === false) {
            return $identity;
        }
        if (strlen($binary) === 4) {
            return (string) inet_ntop($binary);
        }
        if (str_starts_with($binary, str_repeat("\0", 10) . "\xff\xff")) {
            return (string) inet_ntop(substr($binary, 12));
        }
        if ($prefix6 === null) {
            return self::rfc5952($binary);
        }
        $masked = '';
        for ($i = 0; $i < 16; $i++) {
            $bits = max(0, min(8, $prefix6 - 8 * $i));
            $masked .= chr(ord($binary[$i]) & (0xff << (8 - $bits)) & 0xff);
        }

        return self::rfc5952($masked) . "/{$prefix6}";
    }

    /** Lowercase, no leading zeros, the longest run (2+ groups, the first on a tie) as "::". */
    private static function rfc5952(string $binary): string
    {
        $groups = array_values(unpack('n8', $binary));
        [$best, $bestLen, $run] = [-1, 0, 0];
        foreach ($groups as $i => $g) {
            $run = $g === 0 ? $run + 1 : 0;
            if ($run > $bestLen) {
                [$best, $bestLen] = [$i - $run + 1, $run];
            }
        }
        $hex = array_map(static fn (int $g) => dechex($g), $groups);
        if ($bestLen < 2) {
            return implode(':', $hex);
        }

        return implode(':', array_slice($hex, 0, $best)) . '::' . implode(':', array_slice($hex, $best + $bestLen));
    }
}
