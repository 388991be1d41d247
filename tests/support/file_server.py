"""A static file server on loopback with HTTP Range support and fault injection, for download tests.

``FileServer(root)`` serves the files under ``root`` at ``http://127.0.0.1:<port>/<relative path>``
(stdlib ``ThreadingHTTPServer``, HTTP/1.1, daemon thread). It answers GET and HEAD with
``Content-Length``, ``Accept-Ranges: bytes``, ``ETag`` and ``Last-Modified``; a ``Range: bytes=a-b``
(also ``a-`` and ``-n``) gets 206 with ``Content-Range``, an unsatisfiable range 416 with
``Content-Range: bytes */<size>``. Faults, per file name (path relative to root):

- ``cut_after(name, nbytes, times=1)``: send the headers and ``nbytes`` of the body, then close the connection;
- ``corrupt(name, times=1)``: serve the same number of bytes, some of them altered;
- ``fail(name, times=1, status=500)``: answer with an error status.

Counters: ``requests``, ``requests_by_path``, ``range_headers`` (the Range header of each request, None if
absent), ``log``.

Usage::

    with FileServer(folder) as fs:
        fs.cut_after("ml-latest-small.zip", 300_000)
        url = fs.base_url + "ml-latest-small.zip"  # base_url ends in "/"
"""

from __future__ import annotations

import contextlib
import re
import socket
import threading
import time
from collections import Counter, deque
from dataclasses import dataclass
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from urllib.parse import unquote, urlsplit

from tests.support.loopback import LoopbackServer

_RANGE = re.compile(r"^\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*$")
CHUNK = 64 * 1024


@dataclass
class _Fault:
    kind: str  # "cut", "corrupt", "status"
    nbytes: int = 0
    status: int = 500


class FileServer(LoopbackServer):
    """Serve the files of ``root`` over HTTP on 127.0.0.1; use as a context manager.

    Parameters:
        root: the folder to serve.
        latency: seconds added before every answer.
        rate: if set, bytes per second at which bodies are sent (slow links).
    """

    def __init__(self, root: str | Path, *, latency: float = 0.0, rate: float | None = None) -> None:
        self.root = Path(root).resolve()
        if not self.root.is_dir():
            raise NotADirectoryError(f"FileServer root {self.root} is not a folder")
        self.latency = latency
        self.rate = rate
        self._lock = threading.Lock()
        self._faults: dict[str, deque[_Fault]] = {}
        super().__init__()
        self.reset_counters()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def url(self, name: str) -> str:
        return self.base_url + name.lstrip("/")

    # ---- fault injection -------------------------------------------------------------------
    def _add(self, name: str, fault: _Fault, times: int) -> None:
        with self._lock:
            self._faults.setdefault(name.lstrip("/"), deque()).extend(_Fault(**vars(fault)) for _ in range(times))

    def cut_after(self, name: str, nbytes: int, times: int = 1) -> None:
        """The next ``times`` GETs of ``name`` send ``nbytes`` of the body, then the connection is closed."""
        self._add(name, _Fault("cut", nbytes=nbytes), times)

    def corrupt(self, name: str, times: int = 1) -> None:
        """The next ``times`` GETs of ``name`` serve the right length with altered bytes."""
        self._add(name, _Fault("corrupt"), times)

    def fail(self, name: str, times: int = 1, status: int = 500) -> None:
        """The next ``times`` requests for ``name`` get ``status`` (500 by default)."""
        self._add(name, _Fault("status", status=status), times)

    def clear_faults(self) -> None:
        with self._lock:
            self._faults.clear()

    def _next_fault(self, name: str, method: str) -> _Fault | None:
        with self._lock:
            queue = self._faults.get(name)
            if not queue:
                return None
            if method == "HEAD" and queue[0].kind != "status":
                return None  # body faults wait for a GET
            return queue.popleft()

    # ---- counters ----------------------------------------------------------------------------
    def reset_counters(self) -> None:
        with self._lock:
            self.requests = 0
            self.requests_by_path: Counter[str] = Counter()
            self.range_headers: list[str | None] = []
            self.log: list[dict] = []  # method, path, range, status, bytes sent

    def _record(self, entry: dict) -> None:
        with self._lock:
            self.requests += 1
            self.requests_by_path[entry["path"]] += 1
            self.range_headers.append(entry["range"])
            self.log.append(entry)


def _corrupt(data: bytes) -> bytes:
    """Flip every bit of a few bytes spread over the chunk ."""
    if not data:
        return data
    buf = bytearray(data)
    for i in range(0, len(buf), 4096):
        buf[i] ^= 0xFF
    return bytes(buf)


class _FileHandler(BaseHTTPRequestHandler):
    srv: FileServer
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out in separate writes: no 40 ms delayed-ACK stalls
    server_version = "file-test-server/1.0"

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib signature
        pass

    def do_HEAD(self) -> None:  # noqa: N802 - stdlib naming
        self._serve("HEAD")

    def do_GET(self) -> None:  # noqa: N802 - stdlib naming
        self._serve("GET")

    def _error(self, status: int, extra: dict[str, str] | None = None) -> None:
        body = f"{status} {self.responses.get(status, ('error',))[0]}\n".encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _serve(self, method: str) -> None:
        srv = self.srv
        name = unquote(urlsplit(self.path).path).lstrip("/")
        range_header = self.headers.get("Range")
        entry = {"method": method, "path": name, "range": range_header, "status": None, "sent": 0}
        srv._record(entry)  # on arrival: a client may read the counters as soon as it has its answer
        self._serve_file(srv, method, name, range_header, entry)

    def _serve_file(self, srv: FileServer, method: str, name: str, range_header: str | None, entry: dict) -> None:
        srv.sleep(srv.latency)
        path = (srv.root / name).resolve()
        if not name or not path.is_relative_to(srv.root) or not path.is_file():
            entry["status"] = 404
            return self._error(404)
        fault = srv._next_fault(name, method)
        if fault is not None and fault.kind == "status":
            entry["status"] = fault.status
            return self._error(fault.status)

        stat = path.stat()
        size = stat.st_size
        start, end = 0, size - 1
        status = 200
        if range_header:
            m = _RANGE.match(range_header)
            if m and (m.group(1) or m.group(2)):  # a single range; anything else: the whole file (RFC 9110)
                first, last = m.group(1), m.group(2)
                if first:
                    start = int(first)
                    end = min(int(last), size - 1) if last else size - 1
                    ok = start < size and (not last or int(last) >= start)
                else:
                    suffix = int(last)
                    start, end = max(size - suffix, 0), size - 1
                    ok = suffix > 0 and size > 0
                if not ok:
                    entry["status"] = 416
                    return self._error(416, {"Content-Range": f"bytes */{size}"})
                status = 206
        length = end - start + 1 if size else 0

        self.send_response(status)
        self.send_header("Content-Type", "application/zip" if name.endswith(".zip") else "application/octet-stream")
        self.send_header("Content-Length", str(length))
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("ETag", f'"{size:x}-{int(stat.st_mtime):x}"')
        self.send_header("Last-Modified", formatdate(stat.st_mtime, usegmt=True))
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        entry["status"] = status
        self.end_headers()
        if method == "HEAD":
            return None

        limit = fault.nbytes if fault is not None and fault.kind == "cut" else None
        corrupt = fault is not None and fault.kind == "corrupt"
        sent = 0
        with path.open("rb") as fh:
            fh.seek(start)
            remaining = length
            while remaining > 0:
                n = min(CHUNK, remaining)
                if limit is not None:
                    n = min(n, limit - sent)
                    if n <= 0:
                        break
                data = fh.read(n)
                if not data:
                    break
                if corrupt:
                    data = _corrupt(data)
                self.wfile.write(data)
                sent += len(data)
                remaining -= len(data)
                if srv.rate:
                    time.sleep(len(data) / srv.rate)
        entry["sent"] = sent
        if limit is not None and sent < length:
            entry["cut"] = True
            self.wfile.flush()
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)
        return None


FileServer.handler_class = _FileHandler
FileServer.handler_attr = "srv"
