"""Shared by the agent tests: a loopback stand-in for Tinker's OpenAI-compatible API.

It answers ``POST /chat/completions`` and ``GET /models`` with a fixed reply
(or a fixed error) and keeps every request, so tests can check what machine
sent.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from dataclasses import field
from http.server import BaseHTTPRequestHandler
from http.server import ThreadingHTTPServer
from typing import Any


@dataclass
class Stub:
    url: str
    requests: list[dict[str, Any]] = field(default_factory=list)
    status: int = 200
    reply: dict[str, Any] = field(
        default_factory=lambda: {
            "choices": [{"message": {"role": "assistant", "content": "Four."}}]
        }
    )
    models: dict[str, Any] = field(
        default_factory=lambda: {
            "object": "list",
            "data": [
                {"id": "thinkingmachines/Inkling:peft:262144", "object": "model"},
                {"id": "Qwen/Qwen3-8B", "object": "model"},
            ],
        }
    )


@contextmanager
def serve() -> Iterator[Stub]:
    """Run the stub on 127.0.0.1 for the duration of the ``with`` block."""
    stub = Stub(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            stub.requests.append(
                {
                    "path": self.path,
                    "authorization": self.headers.get("Authorization"),
                    "body": json.loads(self.rfile.read(length)),
                }
            )
            self._answer(stub.reply)

        def do_GET(self) -> None:
            stub.requests.append(
                {
                    "path": self.path,
                    "authorization": self.headers.get("Authorization"),
                    "body": None,
                }
            )
            self._answer(stub.models)

        def _answer(self, value: dict[str, Any]) -> None:
            data = json.dumps(value).encode()
            self.send_response(stub.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    stub.url = f"http://127.0.0.1:{server.server_address[1]}/oai/api/v1"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield stub
    finally:
        server.shutdown()
        server.server_close()


def closed_port_url() -> str:
    """A loopback URL nothing listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/oai/api/v1"
