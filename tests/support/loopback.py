"""What the loopback test servers share: a threaded HTTP server on 127.0.0.1 (port 0) and its lifecycle."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Self


class QuietServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256

    def handle_error(self, request, client_address) -> None:  # noqa: ANN001 - stdlib signature
        pass  # clients that give up (timeouts, cut connections) are part of the tests


class LoopbackServer:
    """Start/stop, context manager and an interruptible sleep; subclasses bind their handler class."""

    handler_class: type[BaseHTTPRequestHandler]
    handler_attr: str  # the handler reaches its server through this class attribute

    def __init__(self) -> None:
        self._stop = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self.port = 0

    def start(self) -> Self:
        bound = type(f"_Bound{self.handler_class.__name__}", (self.handler_class,), {self.handler_attr: self})
        self._httpd = QuietServer(("127.0.0.1", 0), bound)
        self.port = self._httpd.server_address[1]
        threading.Thread(target=self._httpd.serve_forever, name=type(self).__name__, daemon=True).start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def sleep(self, seconds: float) -> None:
        """Wait, but wake at once when the server stops."""
        if seconds > 0:
            self._stop.wait(seconds)


@contextmanager
def closed_port() -> Iterator[int]:
    """A loopback port held bound but never listening: connecting is refused at once, and no other process
    can start listening there while the test runs (a port merely freed could be taken)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield s.getsockname()[1]
