"""Something that is not TinyTitan answering on a port (a web server a user pointed --url at by mistake):
404 to every GET, in a thread of the test process."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

__all__ = ["other_server"]


class _NotFound(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # the name http.server calls
        body = b"<html><body>Not Found</body></html>"
        self.send_response(404)
        self.send_header("content-type", "text/html")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # quiet
        return None


@contextmanager
def other_server() -> Iterator[str]:
    """``http://127.0.0.1:PORT`` of a plain HTTP server that answers 404 everywhere."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _NotFound)
    thread = threading.Thread(target=server.serve_forever, name="other-server", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
