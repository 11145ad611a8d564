<?php

use Illuminate\Support\Facades\Route;

Route::middleware('throttle:3,1')->get('/api/plain', static fn () => ['ok' => true]);
Route::middleware('throttle:uploads')->post('/api/upload', static fn () => ['ok' => true]);
Route::middleware('throttle.stock:uploads')->post('/api/stock/upload', static fn () => ['ok' => true]);
Route::middleware('throttle:burst')->get('/api/burst', static fn () => ['ok' => true]);
Route::middleware('throttle.stock:burst')->get('/api/stock/burst', static fn () => ['ok' => true]);
Route::middleware('throttle:custom')->get('/api/custom', static fn () => ['ok' => true]);
