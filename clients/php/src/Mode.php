<?php

declare(strict_types=1);

namespace RedisRl;

enum Mode
{
    /** Spend COST units if every limit admits the request. */
    case Hit;
    /** Report the decision without spending or writing anything. */
    case Peek;
    /** Give back COST units an earlier admitted call spent. */
    case Refund;
    /** Clear the limiter's state. */
    case Reset;

    public function option(): ?string
    {
        return match ($this) {
            self::Hit => null,
            self::Peek => 'PEEK',
            self::Refund => 'REFUND',
            self::Reset => 'RESET',
        };
    }
}
