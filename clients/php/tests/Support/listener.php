<?php

declare(strict_types=1);

// A TCP server that takes each connection, reads what the client sends, and hangs up
// without a reply: a connection lost mid-call. Prints its port, then serves until killed.
$server = stream_socket_server('tcp://127.0.0.1:0', $errno, $error);
if ($server === false) {
    fwrite(STDERR, $error);
    exit(1);
}
echo substr(strrchr(stream_socket_get_name($server, false), ':'), 1), "\n";
while ($client = @stream_socket_accept($server, -1)) {
    fread($client, 65536);
    fclose($client);
}
