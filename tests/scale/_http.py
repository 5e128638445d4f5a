"""A local HTTP server with byte ranges, for reading versioned files through URLs.

It serves one directory on 127.0.0.1 (a free port) from a thread, counts requests and
body bytes sent, and stops when its ``with`` block exits, or by itself after
``lifetime`` seconds at the latest.
"""

from __future__ import annotations

import contextlib
import http.server
import os
import pathlib
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass


@dataclass
class Traffic:
    requests: int = 0
    body_bytes: int = 0


def _handler(directory: pathlib.Path, traffic: Traffic, lock: threading.Lock) -> type:
    class RangeHandler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:  # quiet
            pass

        def _file(self) -> pathlib.Path | None:
            path = (directory / self.path.lstrip("/").split("?")[0]).resolve()
            if directory not in path.parents or not path.is_file():
                self.send_error(404)
                return None
            return path

        def do_HEAD(self) -> None:
            path = self._file()
            if path is None:
                return
            self.send_response(200)
            self.send_header("Content-Length", str(path.stat().st_size))
            self.send_header("Accept-Ranges", "bytes")
            self.end_headers()

        def do_GET(self) -> None:
            path = self._file()
            if path is None:
                return
            size = path.stat().st_size
            start, stop = 0, size
            match = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range", ""))
            if match:
                start = int(match.group(1))
                stop = min(size, int(match.group(2)) + 1) if match.group(2) else size
                self.send_response(206)
                self.send_header("Content-Range", f"bytes {start}-{stop - 1}/{size}")
            else:
                self.send_response(200)
            self.send_header("Content-Length", str(max(0, stop - start)))
            self.send_header("Accept-Ranges", "bytes")
            self.end_headers()
            with path.open("rb") as f:
                f.seek(start)
                body = f.read(max(0, stop - start))
            self.wfile.write(body)
            with lock:
                traffic.requests += 1
                traffic.body_bytes += len(body)

    return RangeHandler


@contextlib.contextmanager
def serve(directory: pathlib.Path, lifetime: float = 120.0) -> Iterator[tuple[str, Traffic]]:
    """Serve ``directory``; yield (base URL, traffic counters)."""
    traffic = Traffic()
    handler = _handler(pathlib.Path(os.path.realpath(directory)), traffic, threading.Lock())
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.daemon = True
    thread.start()
    deadline = threading.Timer(lifetime, server.shutdown)
    deadline.daemon = True
    deadline.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", traffic
    finally:
        deadline.cancel()
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
