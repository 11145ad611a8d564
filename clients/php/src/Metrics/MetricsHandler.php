<?php

declare(strict_types=1);

namespace RedisRl\Metrics;

use Psr\Http\Message\ResponseFactoryInterface;
use Psr\Http\Message\ResponseInterface;
use Psr\Http\Message\ServerRequestInterface;
use Psr\Http\Server\RequestHandlerInterface;

/** A PSR-15 handler for a `/metrics` route: the Registry in Prometheus's text format. */
final class MetricsHandler implements RequestHandlerInterface
{
    public function __construct(
        private readonly Registry $registry,
        private readonly ResponseFactoryInterface $responses,
    ) {
    }

    public function handle(ServerRequestInterface $request): ResponseInterface
    {
        $response = $this->responses->createResponse(200)->withHeader('Content-Type', Registry::CONTENT_TYPE);
        $response->getBody()->write($this->registry->render());

        return $response;
    }
}
