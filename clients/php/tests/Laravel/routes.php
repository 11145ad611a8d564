<?php

use Illuminate\Support\Facades\Route;

Route::middleware('throttle:3,1')->get('/api/plain', static fn () => ['ok' => true]);
Route::middleware('throttle:uploads')->post('/api/upload', static fn () => ['ok' => true]);
Route::middleware('throttle.stock:uploads')->post('/api/stock/upload', static fn () => ['ok' => true]);
Route::middleware('throttle:burst')->get('/api/burst', static fn () => ['ok' => true]);
Route::middleware('throttle.stock:burst')->get('/api/stock/burst', static fn () => ['ok' => true]);
Route::middleware('throttle:custom')->get('/api/custom', static fn () => ['ok' => true]);
Route::middleware('throttle:10,1')->group(static function (): void {
    Route::middleware('throttle:3,1')->get('/api/nested', static fn () => ['ok' => true]);
});
Route::middleware('throttle:0,1')->get('/api/closed', static fn () => ['ok' => true]);
