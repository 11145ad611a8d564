<?php

declare(strict_types=1);

namespace RedisRl;

enum FailureKind
{
    /**
     * Redis could not decide: refused, timed out, connection lost, module not loaded,
     * no secret, NOPERM, OOM, LOADING, CLUSTERDOWN... The failure policy answers.
     */
    case Unavailable;
    /**
     * The call itself is wrong (bad argument, untagged key in a cluster, CROSSSLOT,
     * WRONGTYPE). Retrying cannot help and failing open would switch the limit off for
     * good, so it is thrown, whatever the policy.
     */
    case Misuse;
}
