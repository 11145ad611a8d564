<?php

declare(strict_types=1);

namespace RedisRl\Tests\Support;

use Nyholm\Psr7\Response;
use Psr\Http\Message\ResponseInterface;
use Psr\Http\Message\ServerRequestInterface;
use Psr\Http\Server\RequestHandlerInterface;

/** The application behind the middleware: answers 200 and counts how often it ran. */
final class OkHandler implements RequestHandlerInterface
{
    public int $calls = 0;

    public function handle(ServerRequestInterface $request): ResponseInterface
    {
        $this->calls++;

        return new Response(200, ['Content-Type' => 'text/plain'], 'ok');
    }
}
