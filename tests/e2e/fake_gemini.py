"""A minimal, scripted Gemini API on 127.0.0.1, for the real ``gemini`` CLI.

Gemini CLI (``gemini -p`` with ``GOOGLE_GEMINI_BASE_URL`` pointing here and an
API key) sends ``POST /v1beta/models/<model>:streamGenerateContent?alt=sse``
for the conversation and ``:generateContent`` for its JSON side requests
(the model router's complexity score). The answer is chosen by the words of
the turn's prompt; a request whose last content holds function responses
gets the final text.

| the prompt contains | the model does |
|---|---|
| *(default)* | a thought, then ``read_file notes.md``, then ``The file says: <line>`` |
| ``no-tools`` | text only |
| ``parallel-tools`` | ``read_file notes.md`` and ``list_directory .`` in one answer |
| ``failing-tool`` | ``read_file missing.txt`` (an error), then text |
| ``api-error`` | HTTP 400 ``INVALID_ARGUMENT`` |
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from http.server import ThreadingHTTPServer
from typing import Any

MODEL = "gemini-fake"


def _prompt(contents: list[dict[str, Any]]) -> str:
    """The last user text that is not the CLI's own session context."""
    for content in reversed(contents):
        for part in content.get("parts") or []:
            text = part.get("text") if isinstance(part, dict) else None
            if (
                content.get("role") == "user"
                and isinstance(text, str)
                and not text.startswith("<session_context>")
            ):
                return text
    return ""


def _responses(contents: list[dict[str, Any]]) -> list[dict[str, Any]]:
    last = contents[-1].get("parts") or [] if contents else []
    return [p["functionResponse"] for p in last if "functionResponse" in p]


def _first_line(response: dict[str, Any]) -> str:
    value = response.get("response") or {}
    text = value.get("output") or value.get("error") or ""
    lines = str(text).strip().splitlines()
    return lines[0] if lines else ""


def script(body: dict[str, Any]) -> list[dict[str, Any]] | int:
    """The parts of the answer, or an HTTP error status."""
    config = body.get("generationConfig") or {}
    if config.get("responseMimeType") == "application/json":
        score = {"complexity_reasoning": "a fixture", "complexity_score": 1}
        return [{"text": json.dumps(score)}]
    contents = body.get("contents") or []
    prompt = _prompt(contents)
    answered = _responses(contents)
    if "api-error" in prompt:
        return 400
    if "no-tools" in prompt:
        return [{"text": "Plain answer without tools: 2 + 2 = 4."}]
    if answered:
        if "failing-tool" in prompt:
            return [{"text": f"It failed: {_first_line(answered[0])}"}]
        said = "; ".join(_first_line(r) for r in answered)
        return [{"text": f"The tools said: {said}"}]
    if "parallel-tools" in prompt:
        return [
            {"text": "Read the notes and list the folder.", "thought": True},
            {"functionCall": {"name": "read_file", "args": {"file_path": "notes.md"}}},
            {"functionCall": {"name": "list_directory", "args": {"dir_path": "."}}},
        ]
    name = "missing.txt" if "failing-tool" in prompt else "notes.md"
    return [
        {"text": f"I should read {name}.", "thought": True},
        {"functionCall": {"name": "read_file", "args": {"file_path": name}}},
    ]


def _chunk(parts: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "candidates": [
            {
                "content": {"role": "model", "parts": parts},
                "finishReason": "STOP",
                "index": 0,
            }
        ],
        "usageMetadata": {
            "promptTokenCount": 10,
            "candidatesTokenCount": 5,
            "totalTokenCount": 15,
        },
        "modelVersion": MODEL,
    }


class Server:
    """The fake API: ``url`` once started; every request in ``requests``."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.url = ""
        self._lock = threading.Lock()


def _handler(server: Server) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            return

        def _json(self, status: int, value: Any) -> None:
            data = json.dumps(value).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self._json(200, {"models": []})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            try:
                body = json.loads(self.rfile.read(length) or b"{}")
            except ValueError:
                body = {}
            with server._lock:
                server.requests.append({"path": self.path, "body": body})
            if ":countTokens" in self.path:
                self._json(200, {"totalTokens": 10})
                return
            answer = script(body)
            if isinstance(answer, int):
                error = {
                    "code": answer,
                    "message": "fake model: scripted failure for this fixture",
                    "status": "INVALID_ARGUMENT",
                }
                self._json(answer, {"error": error})
                return
            if ":streamGenerateContent" not in self.path:
                self._json(200, _chunk(answer))
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            try:
                self.wfile.write(f"data: {json.dumps(_chunk(answer))}\r\n\r\n".encode())
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                return
            self.close_connection = True

    return Handler


@contextmanager
def serve() -> Iterator[Server]:
    """Run the fake API on 127.0.0.1 (a free port) for the ``with`` block."""
    server = Server()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(server))
    httpd.daemon_threads = True
    server.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        httpd.shutdown()
        httpd.server_close()
