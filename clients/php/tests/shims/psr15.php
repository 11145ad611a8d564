<?php

declare(strict_types=1);

// PSR-15's two interfaces, for running the tests where psr/http-server-middleware is not
// installed (Debian does not package it, and Composer's registry is out of reach here).
// With Composer the real package is loaded first and nothing is declared here.

namespace Psr\Http\Server;

use Psr\Http\Message\ResponseInterface;
use Psr\Http\Message\ServerRequestInterface;

if (!interface_exists(RequestHandlerInterface::class)) {
    interface RequestHandlerInterface
    {
        public function handle(ServerRequestInterface $request): ResponseInterface;
    }
}

if (!interface_exists(MiddlewareInterface::class)) {
    interface MiddlewareInterface
    {
        public function process(ServerRequestInterface $request, RequestHandlerInterface $handler): ResponseInterface;
    }
}
