"""A minimal, scripted OpenAI Responses API on 127.0.0.1, for the real ``codex``.

Codex (``codex exec`` with a custom model provider whose ``base_url`` points
here and ``wire_api = "responses"``) sends ``POST /v1/responses``; this server
answers from a script chosen by the words of the turn's prompt (the last user
message that is not injected context), the step being how many tool outputs
came back since that prompt. Answers stream as server-sent events
(``response.created``, ``response.output_item.added``/``.done``,
``response.output_text.delta``, ``response.completed``).

| the prompt contains | the model does |
|---|---|
| *(default)* | a reasoning summary, the shell tool with the first backticked |
| | command (else ``echo hello-from-tool``), ``The command printed: <line>`` |
| ``no-tools`` | text only |
| ``parallel-tools`` | one response with two calls (``echo one``, ``echo two``) |
| ``several-tools`` | ``cat notes.md``, then ``wc -l notes.md``, then text |
| ``failing-tool`` | ``ls /nonexistent-dir`` (exit 2), then text |
| ``api-error`` | HTTP 400 ``invalid_request_error`` |
| ``stream-error`` | a ``response.failed`` event |
| ``slow-answer`` | streams text slowly (a turn to interrupt) |
| a compaction request | a summary; after it, ``Done, going on from the summary.`` |
| ``long-output`` | ``seq 1 3000``, then text |
| ``view-image`` | the ``view_image`` tool on ``pixel.png``, then text |

Every request is kept in ``requests`` (and appended to the ``--log`` file
when run as a script). Run as a script: ``python fake_openai_responses.py
--port-file FILE [--log FILE]`` serves until killed.
"""

from __future__ import annotations

import argparse
import json
import re
import threading
import time
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

MODEL = "gpt-fake-1"
_BACKTICK = re.compile(r"`([^`]+)`")
# Codex's own words to the model: context, and the compaction hand-off.
_HANDOFF = "Another language model started to solve this problem"
_COMPACT = "You are performing a CONTEXT CHECKPOINT COMPACTION"
_INJECTED = (
    "<environment_context>",
    "<user_instructions>",
    "<permissions",
    "# AGENTS.md",
    "<turn_context>",
    _HANDOFF,
)


def _text(item: dict[str, Any]) -> str:
    content = item.get("content")
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "\n".join(
        c["text"]
        for c in content
        if isinstance(c, dict) and isinstance(c.get("text"), str)
    )


def _prompt(items: list[dict[str, Any]]) -> tuple[str, int, str]:
    """The turn's prompt, the tool-output rounds after it, the last output's text."""
    rounds = 0
    last: str | None = None
    seen_call = False
    for item in reversed(items):
        kind = item.get("type")
        if kind in ("function_call_output", "custom_tool_call_output"):
            if last is None:
                output = item.get("output")
                last = output if isinstance(output, str) else json.dumps(output)
            seen_call = False
            continue
        if kind in ("function_call", "custom_tool_call", "local_shell_call"):
            if not seen_call:
                rounds += 1
            seen_call = True
            continue
        seen_call = False
        if kind in (None, "message") and item.get("role") == "user":
            text = _text(item)
            if text.strip() and not text.lstrip().startswith(_INJECTED):
                return text, rounds, last or ""
    return "", rounds, last or ""


def _output_line(output: str) -> str:
    # Codex wraps exec output: a JSON object with "output", or a text header
    # ("Exit code: 0\nWall time: ...\nOutput:\n...").
    try:
        value = json.loads(output)
        if isinstance(value, dict) and isinstance(value.get("output"), str):
            output = value["output"]
    except ValueError:
        if "Output:\n" in output:
            output = output.split("Output:\n", 1)[1]
    lines = output.strip().splitlines()
    return lines[0] if lines else ""


def _shell(tools: list[dict[str, Any]]) -> tuple[str, str]:
    """The name of the shell tool Codex offered and its argument kind."""
    names = [t.get("name") for t in tools if isinstance(t, dict)]
    for name in ("exec_command", "shell_command", "shell"):
        if name in names:
            return name, name
    return "shell", "shell"


def _args(kind: str, command: str) -> dict[str, Any]:
    if kind == "exec_command":
        return {"cmd": command}
    if kind == "shell_command":
        return {"command": command}
    return {"command": ["bash", "-lc", command]}


class _Ask:
    """One request: its prompt, how far the turn got, and item makers."""

    def __init__(self, body: dict[str, Any]) -> None:
        items = [i for i in body.get("input") or [] if isinstance(i, dict)]
        self.prompt, self.step, last = _prompt(items)
        # After a compaction the tool rounds are gone from the input: finish.
        self.compacted = any(
            _text(i).startswith(_HANDOFF) for i in items if i.get("role") == "user"
        )
        self.line = _output_line(last)
        self.name, self.kind = _shell(body.get("tools") or [])
        self.crc = zlib.crc32(self.prompt.encode())

    def call(self, k: int, command: str) -> dict[str, Any]:
        return self.tool(k, self.name, _args(self.kind, command))

    def tool(self, k: int, name: str, args: dict[str, Any]) -> dict[str, Any]:
        tag = f"{self.crc:08x}_{self.step}_{k}"
        return {
            "type": "function_call",
            "id": f"fc_fake_{tag}",
            "call_id": f"call_fake_{tag}",
            "name": name,
            "arguments": json.dumps(args),
            "status": "completed",
        }

    def say(self, text: str) -> dict[str, Any]:
        return {
            "type": "message",
            "id": f"msg_fake_{self.crc:08x}_{self.step}",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}],
        }

    def think(self, text: str) -> dict[str, Any]:
        return {
            "type": "reasoning",
            "id": f"rs_fake_{self.crc:08x}_{self.step}",
            "summary": [{"type": "summary_text", "text": text}],
        }


Steps = list[list[dict[str, Any]]]


def _default(a: _Ask) -> Steps:
    found = _BACKTICK.search(a.prompt)
    command = found.group(1) if found else "echo hello-from-tool"
    return [
        [a.think(f"I should run `{command}`."), a.call(0, command)],
        [a.say(f"The command printed: {a.line}")],
    ]


# The first keyword the prompt contains chooses the script.
SCRIPTS: list[tuple[str, Any]] = [
    ("no-tools", lambda a: [[a.say("Plain answer without tools: 2 + 2 = 4.")]]),
    (
        "parallel-tools",
        lambda a: [
            [
                a.think("Run both echoes at once."),
                a.call(0, "echo one"),
                a.call(1, "echo two"),
            ],
            [a.say("Ran two commands in parallel.")],
        ],
    ),
    (
        "several-tools",
        lambda a: [
            [a.call(0, "cat notes.md")],
            [a.call(0, "wc -l notes.md")],
            [a.say(f"notes.md: {a.line}")],
        ],
    ),
    (
        "failing-tool",
        lambda a: [
            [a.call(0, "ls /nonexistent-dir")],
            [a.say("The directory does not exist.")],
        ],
    ),
    ("slow-answer", lambda a: [[a.say("Starting a very long essay. " * 40)]]),
    (
        "long-output",
        lambda a: [[a.call(0, "seq 1 3000")], [a.say("Printed 3000 numbers.")]],
    ),
    (
        "view-image",
        lambda a: [
            [a.tool(0, "view_image", {"path": "pixel.png"})],
            [a.say("The image is a tiny 2x2 picture.")],
        ],
    ),
]


def script(body: dict[str, Any]) -> list[dict[str, Any]] | int | str:
    """The output items of the answer, an HTTP error status, or "failed"."""
    a = _Ask(body)
    if a.prompt.startswith(_COMPACT):
        return [a.say("Summary: the user asked to run a command; it ran.")]
    if a.compacted and a.step == 0:
        return [a.say("Done, going on from the summary.")]
    if "api-error" in a.prompt:
        return 400
    if "stream-error" in a.prompt:
        return "failed"
    make = next((f for word, f in SCRIPTS if word in a.prompt), _default)
    steps: Steps = make(a)
    return steps[min(a.step, len(steps) - 1)]


def _events(
    items: list[dict[str, Any]], response_id: str, sent: int
) -> Iterator[dict[str, Any]]:
    """The stream of one answer; ``sent`` input items count 10 tokens each (a
    compaction makes the next request small again, as it does for real)."""
    response = {
        "id": response_id,
        "object": "response",
        "model": MODEL,
        "status": "in_progress",
        "output": [],
    }
    yield {"type": "response.created", "response": response}
    for index, item in enumerate(items):
        yield {
            "type": "response.output_item.added",
            "output_index": index,
            "item": {**item, "status": "in_progress"},
        }
        if item["type"] == "message":
            for word in re.findall(r"\S+\s*", item["content"][0]["text"]):
                yield {
                    "type": "response.output_text.delta",
                    "output_index": index,
                    "item_id": item["id"],
                    "content_index": 0,
                    "delta": word,
                }
        if item["type"] == "reasoning":
            text = item["summary"][0]["text"]
            yield {
                "type": "response.reasoning_summary_text.delta",
                "output_index": index,
                "item_id": item["id"],
                "summary_index": 0,
                "delta": text,
            }
        yield {"type": "response.output_item.done", "output_index": index, "item": item}
    usage = {
        "input_tokens": 10 * sent,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 5,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 10 * sent + 5,
    }
    yield {
        "type": "response.completed",
        "response": {
            **response,
            "status": "completed",
            "output": items,
            "usage": usage,
        },
    }


class Server:
    """The fake API: ``url`` (ending in ``/v1``) once started; ``requests``."""

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
            path = self.path.split("?", 1)[0]
            server.record(path, None)
            if path.endswith("/models"):
                self._json(
                    200,
                    {
                        "object": "list",
                        "data": [{"id": MODEL, "object": "model"}],
                        "models": [],
                    },
                )
                return
            self._json(404, {"error": {"message": f"no {path}", "type": "not_found"}})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                body = {}
            path = self.path.split("?", 1)[0]
            number = server.record(path, body)
            if not path.endswith("/responses"):
                self._json(
                    404, {"error": {"message": f"no {path}", "type": "not_found"}}
                )
                return
            answer = script(body)
            if isinstance(answer, int):
                message = "fake model: scripted failure for this fixture"
                self._json(
                    answer,
                    {
                        "error": {
                            "message": message,
                            "type": "invalid_request_error",
                            "code": None,
                        }
                    },
                )
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            response_id = f"resp_fake_{number:04d}"
            if answer == "failed":
                error = {
                    "code": "server_error",
                    "message": "fake model: scripted stream failure",
                }
                events: Iterator[dict[str, Any]] = iter(
                    [
                        {"type": "response.created", "response": {"id": response_id}},
                        {
                            "type": "response.failed",
                            "response": {
                                "id": response_id,
                                "status": "failed",
                                "error": error,
                            },
                        },
                    ]
                )
            else:
                assert isinstance(answer, list)
                events = _events(answer, response_id, len(body.get("input") or []))
            slow = "slow-answer" in _Ask(body).prompt
            try:
                for event in events:
                    data = json.dumps(event)
                    self.wfile.write(
                        f"event: {event['type']}\ndata: {data}\n\n".encode()
                    )
                    self.wfile.flush()
                    if slow:
                        time.sleep(0.05)
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
    server.url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        httpd.shutdown()
        httpd.server_close()


def config_toml(url: str) -> str:
    """A ``config.toml`` for ``$CODEX_HOME`` that sends Codex to the fake at ``url``."""
    return (
        'model = "gpt-fake-1"\n'
        'model_provider = "fake"\n'
        'approval_policy = "never"\n'
        'sandbox_mode = "danger-full-access"\n'
        "[model_providers.fake]\n"
        'name = "Fake"\n'
        f'base_url = "{url}"\n'
        'wire_api = "responses"\n'
        'env_key = "FAKE_OPENAI_KEY"\n'
        "request_max_retries = 0\n"
        "stream_max_retries = 0\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--port-file", type=Path, required=True)
    parser.add_argument("--log", type=Path)
    args = parser.parse_args()
    with serve(args.log) as server:
        args.port_file.write_text(server.url.rsplit(":", 1)[1].split("/", 1)[0])
        threading.Event().wait()


if __name__ == "__main__":
    main()
