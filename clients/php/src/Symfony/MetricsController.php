<?php

declare(strict_types=1);

namespace RedisRl\Symfony;

use RedisRl\Metrics\Registry;
use Symfony\Component\HttpFoundation\Response;

/** A `/metrics` route for Symfony: the kit's Registry in Prometheus's text format. */
final class MetricsController
{
    public function __construct(private readonly Registry $registry)
    {
    }

    public function __invoke(): Response
    {
        return new Response($this->registry->render(), 200, ['Content-Type' => Registry::CONTENT_TYPE]);
    }
}
