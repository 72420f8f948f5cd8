"""A minimal MCP server over stdio with one tool, ``echo``, for the real agents.

Claude Code starts it from an ``--mcp-config`` file (``python fake_mcp.py``);
it answers ``initialize``, ``tools/list`` and ``tools/call`` (JSON-RPC 2.0, one
message per line) and nothing else, so a session shows what an MCP tool call
looks like (``mcp__<server>__echo``).
"""

from __future__ import annotations

import json
import sys
from typing import Any

TOOL = {
    "name": "echo",
    "description": "Echo the text back, upper-cased.",
    "inputSchema": {
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
    },
}


def answer(request: dict[str, Any]) -> dict[str, Any] | None:
    """The response to one request (None for a notification)."""
    method = request.get("method")
    if "id" not in request:
        return None
    if method == "initialize":
        result: dict[str, Any] = {
            "protocolVersion": request.get("params", {}).get(
                "protocolVersion", "2025-06-18"
            ),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "fake", "version": "1.0.0"},
        }
    elif method == "tools/list":
        result = {"tools": [TOOL]}
    elif method == "tools/call":
        text = str(request.get("params", {}).get("arguments", {}).get("text", ""))
        result = {"content": [{"type": "text", "text": text.upper()}]}
    else:
        error = {"code": -32601, "message": f"no method {method}"}
        return {"jsonrpc": "2.0", "id": request["id"], "error": error}
    return {"jsonrpc": "2.0", "id": request["id"], "result": result}


def main() -> None:
    for line in sys.stdin:
        if not line.strip():
            continue
        response = answer(json.loads(line))
        if response is not None:
            sys.stdout.write(json.dumps(response) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
