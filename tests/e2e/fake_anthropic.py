"""A minimal, scripted Anthropic Messages API on 127.0.0.1, for the real ``claude``.

Claude Code (``claude -p`` with ``ANTHROPIC_BASE_URL`` pointing here) sends
``POST /v1/messages``; this server answers from a script chosen by the words
of the turn's prompt (the last user text that is not a tool result), the
step being how many tool results came back since that prompt. Answers stream
as server-sent events (``message_start``, ``content_block_*`` with
``text_delta``/``thinking_delta``/``input_json_delta``, ``message_delta``,
``message_stop``) or come whole when the request does not ask to stream.

| the prompt contains | the model does |
|---|---|
| *(default)* | thinking, ``Bash`` with the first backticked ``echo`` command |
| | (else ``echo hello-from-tool``), then ``The command printed: <line>`` |
| ``no-tools`` | text only |
| ``several-tools`` | ``Read notes.md``, then ``Bash cat notes.md | wc -l``, then text |
| ``parallel-tools`` | one response with three calls: ``Bash echo one``, |
| | ``Bash echo two``, ``Read notes.md``; then text |
| ``failing-tool`` | ``Bash cat missing.txt`` (exit 1), then text |
| ``api-error`` | HTTP 400 ``invalid_request_error`` |
| ``long-output`` | ``Bash seq 1 3000``, then text |
| ``subagent`` | ``Task``/``Agent`` (prompt ``subagent-job: ...``), then text |
| ``subagent-job`` | (the subagent) ``Bash echo from-subagent``, then text |
| ``slow-answer`` | streams text slowly (a turn to interrupt) |
| ``mcp-tool`` | ``mcp__fake__echo {"text": "from mcp"}`` (fake_mcp.py), then text |
| a summary request | a fixed ``<summary>`` text (compaction) |
| ``<machine-command>`` (machine's /good) | repeats what machine printed |
| ``big-context`` (in the request) | reports 190000 input tokens (so Claude compacts) |

Requests that offer no tools (titles, summaries, quota checks) get a short
plain answer. Every request is kept in ``requests`` (and appended to the
``--log`` file when run as a script), so tests can check what was sent.

Run as a script: ``python fake_anthropic.py --port-file FILE [--log FILE]``
serves until killed, writing the port it listens on to FILE.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import threading
import time
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

MODEL = "claude-fake-1"
SUBAGENT_PROMPT = "subagent-job: run `echo from-subagent`"
_BACKTICK = re.compile(r"`([^`]+)`")


def _texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    if not isinstance(content, list):
        return []
    return [
        b["text"]
        for b in content
        if isinstance(b, dict)
        and b.get("type") == "text"
        and isinstance(b.get("text"), str)
    ]


def _results(content: Any) -> list[dict[str, Any]]:
    if not isinstance(content, list):
        return []
    return [
        b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"
    ]


def _result_text(block: dict[str, Any]) -> str:
    content = block.get("content")
    return "\n".join(_texts(content)) if not isinstance(content, str) else content


def _prompt(messages: list[dict[str, Any]]) -> tuple[str, int, list[dict[str, Any]]]:
    """The turn's prompt, how many tool-result rounds followed it, the last results."""
    rounds = 0
    last: list[dict[str, Any]] = []
    for message in reversed(messages):
        if message.get("role") != "user":
            continue
        results = _results(message.get("content"))
        if results:
            if not last:
                last = results
            rounds += 1
            continue
        # Claude Code prepends <system-reminder> blocks to the prompt's message.
        texts = [
            t
            for t in _texts(message.get("content"))
            if not t.lstrip().startswith("<system-reminder>")
        ]
        if texts:
            return "\n".join(texts), rounds, last
    return "", rounds, last


def _call_id(prompt: str, step: int, k: int) -> str:
    return f"toolu_fake_{zlib.crc32(prompt.encode()):08x}_{step}_{k}"


class _Ask:
    """One request: its prompt, how far the turn got, and block makers."""

    def __init__(self, body: dict[str, Any]) -> None:
        self.body = body
        self.tools = [
            t.get("name") for t in body.get("tools") or [] if isinstance(t, dict)
        ]
        self.prompt, self.step, last = _prompt(body.get("messages") or [])
        first = _result_text(last[0]).strip().splitlines() if last else []
        self.line = first[0] if first else ""

    def call(self, k: int, name: str, args: dict[str, Any]) -> dict[str, Any]:
        call_id = _call_id(self.prompt, self.step, k)
        return {"type": "tool_use", "id": call_id, "name": name, "input": args}

    def bash(self, k: int, command: str, description: str) -> dict[str, Any]:
        return self.call(k, "Bash", {"command": command, "description": description})

    def read(self, k: int, name: str) -> dict[str, Any]:
        return self.call(k, "Read", {"file_path": _abs(name, self.body)})


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def think(value: str) -> dict[str, Any]:
    return {"type": "thinking", "thinking": value, "signature": "fake-signature"}


Steps = list[list[dict[str, Any]]]


def _subagent_job(a: _Ask) -> Steps:
    return [
        [a.bash(0, "echo from-subagent", "Echo")],
        [text(f"Subagent done: {a.line}")],
    ]


def _subagent(a: _Ask) -> Steps:
    args = {
        "description": "Run the job",
        "prompt": SUBAGENT_PROMPT,
        "subagent_type": "general-purpose",
        "run_in_background": False,
    }
    agent = "Task" if "Task" in a.tools else "Agent"
    return [
        [think("Delegate the job to a subagent."), a.call(0, agent, args)],
        [text(f"The subagent said: {a.line}")],
    ]


def _parallel(a: _Ask) -> Steps:
    return [
        [
            think("Run both echoes and read the notes at once."),
            a.bash(0, "echo one", "Echo one"),
            a.bash(1, "echo two", "Echo two"),
            a.read(2, "notes.md"),
        ],
        [text("Ran three tools in parallel.")],
    ]


def _several(a: _Ask) -> Steps:
    return [
        [text("First I read the notes."), a.read(0, "notes.md")],
        [a.bash(0, "cat notes.md | wc -l", "Count lines")],
        [text(f"notes.md has {a.line} lines.")],
    ]


def _default(a: _Ask) -> Steps:
    commands = [c for c in _BACKTICK.findall(a.prompt) if c.startswith("echo ")]
    command = commands[0] if commands else "echo hello-from-tool"
    return [
        [think(f"I should run `{command}`."), a.bash(0, command, "Run it")],
        [text(f"The command printed: {a.line}")],
    ]


# The first keyword the prompt contains chooses the script.
SCRIPTS: list[tuple[str, Any]] = [
    ("subagent-job", _subagent_job),
    ("subagent", _subagent),
    ("no-tools", lambda a: [[text("Plain answer without tools: 2 + 2 = 4.")]]),
    ("parallel-tools", _parallel),
    ("several-tools", _several),
    (
        "failing-tool",
        lambda a: [
            [a.bash(0, "cat missing.txt", "Show")],
            [text("missing.txt does not exist.")],
        ],
    ),
    (
        "long-output",
        lambda a: [
            [a.bash(0, "seq 1 3000", "Count")],
            [text("Printed 3000 numbers.")],
        ],
    ),
    (
        "image-read",
        lambda a: [
            [a.read(0, "pixel.png")],
            [text("The image is a tiny 2x2 picture.")],
        ],
    ),
    ("slow-answer", lambda a: [[text("Starting a very long essay. " * 40)]]),
    (
        "mcp-tool",
        lambda a: [
            [a.call(0, "mcp__fake__echo", {"text": "from mcp"})],
            [text(f"The MCP tool said: {a.line}")],
        ],
    ),
]


def script(body: dict[str, Any]) -> tuple[list[dict[str, Any]], str] | int:
    """The content blocks and stop reason of the answer, or an HTTP error status."""
    a = _Ask(body)
    compaction = "TEXT ONLY" in a.prompt and "summary" in a.prompt.lower()
    if (
        compaction
        or "<summary>" in a.prompt
        or (not a.tools and "summar" in a.prompt.lower())
    ):
        summary = "<summary>\n1. Primary Request: the fixture turns.\n</summary>"
        return [text(summary)], "end_turn"
    if not a.tools:
        return [text("Fake title")], "end_turn"
    if "<machine-command>" in a.prompt:
        # machine's /good, /bad, /machine: repeat what machine printed.
        inner = a.prompt.split("<machine-command>", 1)[1]
        return [text(inner.split("</machine-command>")[0].strip())], "end_turn"
    if "api-error" in a.prompt:
        return 400
    make = next((f for word, f in SCRIPTS if word in a.prompt), _default)
    steps = make(a)
    blocks = steps[min(a.step, len(steps) - 1)]
    tool_use = any(b["type"] == "tool_use" for b in blocks)
    return blocks, "tool_use" if tool_use else "end_turn"


def _abs(name: str, body: dict[str, Any]) -> str:
    # Read wants an absolute path: the cwd is in the system prompt's environment.
    found = re.search(
        r"Primary working directory: (\S+)", json.dumps(body.get("system") or "")
    )
    if not found:
        found = re.search(r"[Ww]orking directory: (\S+?)(?:\\n|\s)", json.dumps(body))
    folder = found.group(1) if found else "."
    return f"{folder}/{name}"


def _events(
    blocks: list[dict[str, Any]],
    stop: str,
    message_id: str,
    slow: bool,
    sent: int = 10,
) -> Iterator[tuple[str, dict[str, Any]]]:
    usage = {
        "input_tokens": sent,
        "output_tokens": 5,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }
    yield (
        "message_start",
        {
            "type": "message_start",
            "message": {
                "id": message_id,
                "type": "message",
                "role": "assistant",
                "model": MODEL,
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": usage,
            },
        },
    )
    for index, block in enumerate(blocks):
        kind = block["type"]
        if kind == "text":
            yield (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {"type": "text", "text": ""},
                },
            )
            words = re.findall(r"\S+\s*", block["text"]) or [""]
            for word in words:
                yield (
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "text_delta", "text": word},
                    },
                )
                if slow:
                    time.sleep(0.05)
        elif kind == "thinking":
            yield (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {
                        "type": "thinking",
                        "thinking": "",
                        "signature": "",
                    },
                },
            )
            yield (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "thinking_delta", "thinking": block["thinking"]},
                },
            )
            yield (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {
                        "type": "signature_delta",
                        "signature": block["signature"],
                    },
                },
            )
        else:
            yield (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {
                        "type": "tool_use",
                        "id": block["id"],
                        "name": block["name"],
                        "input": {},
                    },
                },
            )
            raw = json.dumps(block["input"])
            half = len(raw) // 2
            for part in (raw[:half], raw[half:]):
                yield (
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "input_json_delta", "partial_json": part},
                    },
                )
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
    yield (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop, "stop_sequence": None},
            "usage": {"output_tokens": 5},
        },
    )
    yield "message_stop", {"type": "message_stop"}


class Server:
    """The fake API; ``url`` once started, every request body in ``requests``."""

    def __init__(self, log: Path | None = None) -> None:
        self.requests: list[dict[str, Any]] = []
        self.log = log
        self.url = ""
        self._count = 0
        self._lock = threading.Lock()

    def record(self, path: str, body: Any) -> int:
        with self._lock:
            self._count += 1
            self.requests.append({"path": path, "body": body})
            if self.log is not None:
                with self.log.open("a") as f:
                    f.write(json.dumps({"path": path, "body": body}) + "\n")
            return self._count


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
            self._json(
                404,
                {
                    "type": "error",
                    "error": {"type": "not_found_error", "message": "not here"},
                },
            )

        def do_HEAD(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            try:
                body = json.loads(self.rfile.read(length) or b"{}")
            except ValueError:
                body = {}
            path = self.path.split("?", 1)[0]
            number = server.record(path, body)
            if path.endswith("/count_tokens"):
                self._json(200, {"input_tokens": 10})
                return
            if not path.endswith("/v1/messages"):
                self._json(
                    404,
                    {
                        "type": "error",
                        "error": {"type": "not_found_error", "message": path},
                    },
                )
                return
            answer = script(body)
            if isinstance(answer, int):
                message = "fake model: scripted failure for this fixture"
                self._json(
                    answer,
                    {
                        "type": "error",
                        "error": {"type": "invalid_request_error", "message": message},
                    },
                )
                return
            blocks, stop = answer
            message_id = f"msg_fake_{number:04d}"
            if not body.get("stream"):
                self._json(
                    200,
                    {
                        "id": message_id,
                        "type": "message",
                        "role": "assistant",
                        "model": MODEL,
                        "content": blocks,
                        "stop_reason": stop,
                        "stop_sequence": None,
                        "usage": {"input_tokens": 10, "output_tokens": 5},
                    },
                )
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            prompt = _prompt(body.get("messages") or [])[0]
            try:
                # "big-context" reports a nearly full context window, so
                # Claude Code compacts before its next request.
                sent = 190_000 if "big-context" in json.dumps(body) else 10
                for name, data in _events(
                    blocks, stop, message_id, "slow-answer" in prompt, sent
                ):
                    self.wfile.write(
                        f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()
                    )
                    self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                return
            self.close_connection = True

    return Handler


@contextmanager
def serve(log: Path | None = None) -> Iterator[Server]:
    """Run the fake API on 127.0.0.1 (a free port) for the ``with`` block."""
    server = Server(log)
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port-file", type=Path, required=True)
    parser.add_argument("--log", type=Path)
    args = parser.parse_args()
    with serve(args.log) as server:
        args.port_file.write_text(server.url.rsplit(":", 1)[1])
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            sys.exit(0)


if __name__ == "__main__":
    main()
