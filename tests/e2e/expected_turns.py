"""What the last turn of each real Claude Code and Codex scenario must read as.

Written from the fake models' scripts (fake_anthropic.py,
fake_openai_responses.py) and from reading the files the CLIs wrote
(tests/fixtures/{claude,codex}/real/), not from running the reader. The same
expectations hold for the committed files and for the sessions the e2e tests
generate live: the fakes make tool-call ids from the prompt's text, so only
times, uuids and Codex's per-run chunk ids (matched by pattern) change.

Records are trajectory-v1 without their ``timestamp``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from collections.abc import Sequence
from typing import Any

Expected = list[dict[str, Any]]

CLAUDE_CWD = "/tmp/machine-fixture/claude-proj"


def user(text: str, images: list[dict[str, str]] | None = None) -> dict[str, Any]:
    record: dict[str, Any] = {"role": "user", "content": text}
    if images is not None:
        record["images"] = images  # kept inline by the reader (rows/images.py)
    return record


def thinks(text: str) -> dict[str, Any]:
    return {"role": "reasoning", "content": text}


def says(text: str | re.Pattern[str]) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def calls(*items: tuple[str, str, str]) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": i, "name": n, "args": a} for i, n, a in items],
    }


def result(
    call: str,
    content: str | re.Pattern[str],
    ok: bool | None = None,
    images: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    record: dict[str, Any] = {"role": "tool", "tool_call_id": call, "content": content}
    if ok is not None:
        record["ok"] = ok
    if images is not None:
        record["images"] = images  # kept inline by the reader (rows/images.py)
    return record


def bash(command: str, description: str = "Run it") -> str:
    return json.dumps(
        {"command": command, "description": description}, separators=(",", ":")
    )


def _echo(prompt: str, crc: str, out: str) -> Expected:
    call = f"toolu_fake_{crc}_0_0"
    return [
        user(prompt),
        thinks(f"I should run `echo {out}`."),
        calls((call, "Bash", bash(f"echo {out}"))),
        result(call, out, ok=True),
        says(f"The command printed: {out}"),
    ]


NOTES = "1\t# Notes\n2\tfixture notes line 2\n3\t"
READ_NOTES = json.dumps({"file_path": f"{CLAUDE_CWD}/notes.md"}, separators=(",", ":"))
# The 2x2 PNG the scenarios make (pixel.png), as the agents record it.
PIXEL = {
    "media_type": "image/png",
    "base64": "iVBORw0KGgoAAAANSUhEUgAAAAIAAAACCAIAAAD91JpzAAAAEklEQVR42mP4z8DAAMIM"
    "/4EAAB/uBfvxq7p3AAAAAElFTkSuQmCC",
}
READ_PIXEL = json.dumps({"file_path": f"{CLAUDE_CWD}/pixel.png"}, separators=(",", ":"))

# scenario -> (records, stop_reason, error)
CLAUDE: dict[str, tuple[Expected, str | None, str | None]] = {
    "basic": (
        _echo("Please run `echo hello-from-tool`.", "6ce130fb", "hello-from-tool"),
        "end_turn",
        None,
    ),
    "no-tools": (
        [
            user("no-tools: what is 2 + 2?"),
            says("Plain answer without tools: 2 + 2 = 4."),
        ],
        "end_turn",
        None,
    ),
    "several-tools": (
        [
            user("several-tools: read notes.md and count its lines."),
            says("First I read the notes."),
            calls(("toolu_fake_8c7f9a94_0_0", "Read", READ_NOTES)),
            result("toolu_fake_8c7f9a94_0_0", NOTES),
            calls(
                (
                    "toolu_fake_8c7f9a94_1_0",
                    "Bash",
                    bash("cat notes.md | wc -l", "Count lines"),
                )
            ),
            result("toolu_fake_8c7f9a94_1_0", "2", ok=True),
            says("notes.md has 2 lines."),
        ],
        "end_turn",
        None,
    ),
    "parallel-tools": (
        [
            user("parallel-tools: echo one and two, and read notes.md."),
            thinks("Run both echoes and read the notes at once."),
            calls(
                ("toolu_fake_7fa13944_0_0", "Bash", bash("echo one", "Echo one")),
                ("toolu_fake_7fa13944_0_1", "Bash", bash("echo two", "Echo two")),
                ("toolu_fake_7fa13944_0_2", "Read", READ_NOTES),
            ),
            # Results in the order Claude Code wrote them (the Read finished first).
            result("toolu_fake_7fa13944_0_2", NOTES),
            result("toolu_fake_7fa13944_0_0", "one", ok=True),
            result("toolu_fake_7fa13944_0_1", "two", ok=True),
            says("Ran three tools in parallel."),
        ],
        "end_turn",
        None,
    ),
    "failing-tool": (
        [
            user("failing-tool: show missing.txt."),
            calls(("toolu_fake_3b75c3c4_0_0", "Bash", bash("cat missing.txt", "Show"))),
            result(
                "toolu_fake_3b75c3c4_0_0",
                "Error: Exit code 1\ncat: missing.txt: No such file or directory",
                ok=False,
            ),
            says("missing.txt does not exist."),
        ],
        "end_turn",
        None,
    ),
    "api-error": (
        [user("api-error: this request will fail.")],
        "error",
        "API Error: 400 fake model: scripted failure for this fixture",
    ),
    "long-output": (
        [
            user("long-output: count to 3000."),
            calls(("toolu_fake_519e1d06_0_0", "Bash", bash("seq 1 3000", "Count"))),
            result(
                "toolu_fake_519e1d06_0_0",
                "\n".join(str(n) for n in range(1, 3001)),
                ok=True,
            ),
            says("Printed 3000 numbers."),
        ],
        "end_turn",
        None,
    ),
    "image": (
        [
            user("image-read: what is in pixel.png?"),
            calls(
                (
                    "toolu_fake_72170c9b_0_0",
                    "Read",
                    READ_PIXEL,
                )
            ),
            result("toolu_fake_72170c9b_0_0", "[image]", images=[PIXEL]),
            says("The image is a tiny 2x2 picture."),
        ],
        "end_turn",
        None,
    ),
    # An image block in the prompt itself (stream-json input, as an SDK sends).
    "prompt-image": (
        [
            user("no-tools: what is in this image?\n[image]", images=[PIXEL]),
            says("Plain answer without tools: 2 + 2 = 4."),
        ],
        "end_turn",
        None,
    ),
    "subagent": (
        [
            user("subagent: delegate the job."),
            thinks("Delegate the job to a subagent."),
            calls(
                (
                    "toolu_fake_b999f8c8_0_0",
                    "Agent",
                    '{"description":"Run the job","prompt":"subagent-job: run `echo '
                    'from-subagent`","subagent_type":"general-purpose",'
                    '"run_in_background":false}',
                )
            ),
            result(
                "toolu_fake_b999f8c8_0_0",
                re.compile(r"(?s).*Subagent done: from-subagent.*"),
            ),
            says(
                "The subagent said: "
                "<tools-used-before-summary>Bash</tools-used-before-summary>"
            ),
        ],
        "end_turn",
        None,
    ),
    # A custom prompt command (.claude/commands/greet.md): the turn's text is
    # the prompt it expanded to, what the model was sent.
    "custom-command": (
        [
            user("no-tools: greet world warmly.\n"),
            says("Plain answer without tools: 2 + 2 = 4."),
        ],
        "end_turn",
        None,
    ),
    # A local command (/cost) after a turn is noise: the turn before it is the last.
    "local-command": (
        _echo("Run `echo before-local`.", "910db09d", "before-local"),
        "end_turn",
        None,
    ),
    "compact": (
        _echo(
            "After compaction: run `echo after-compact`.", "2e6979d9", "after-compact"
        ),
        "end_turn",
        None,
    ),
    "resume": (
        _echo("Resumed by id: run `echo third-turn`.", "30f60187", "third-turn"),
        "end_turn",
        None,
    ),
    "interrupt": (
        [
            user("slow-answer: write a long essay."),
            says("Starting a very long essay. Starting a "),
        ],
        "aborted",
        "Request interrupted by user",
    ),
    # Auto-compaction between the prompt and the answer: the branch runs
    # through the compaction boundary (logicalParentUuid) back to the prompt,
    # and the compact summary row is not the user.
    "auto-compact": (
        _echo(
            "After auto-compaction: run `echo second-turn`.", "d756d4d3", "second-turn"
        ),
        "end_turn",
        None,
    ),
    # An MCP tool (tests/e2e/fake_mcp.py, started from --mcp-config).
    "mcp": (
        [
            user("mcp-tool: echo through the MCP server."),
            calls(
                ("toolu_fake_ca3085cc_0_0", "mcp__fake__echo", '{"text":"from mcp"}')
            ),
            result("toolu_fake_ca3085cc_0_0", "FROM MCP"),
            says("The MCP tool said: FROM MCP"),
        ],
        "end_turn",
        None,
    ),
}

# The subagent's own file (real/subagent/subagents/agent-*.jsonl), read alone.
CLAUDE_SUBAGENT: Expected = [
    user("subagent-job: run `echo from-subagent`"),
    calls(("toolu_fake_ad844b88_0_0", "Bash", bash("echo from-subagent", "Echo"))),
    result("toolu_fake_ad844b88_0_0", "from-subagent", ok=True),
    says("Subagent done: from-subagent"),
]


def exec_output(code: int, output: str) -> re.Pattern[str]:
    """Codex's unified-exec output: a header (its chunk id changes per run)."""
    return re.compile(
        r"Chunk ID: [0-9a-f]+\nWall time: [0-9.]+ seconds\n"
        rf"Process exited with code {code}\nOriginal token count: \d+\nOutput:\n"
        + re.escape(output)
    )


def cmd(command: str) -> str:
    return json.dumps({"cmd": command})


def _codex_echo(prompt: str, crc: str, out: str) -> Expected:
    call = f"call_fake_{crc}_0_0"
    return [
        user(prompt),
        thinks(f"I should run `echo {out}`."),
        calls((call, "exec_command", cmd(f"echo {out}"))),
        result(call, exec_output(0, f"{out}\n"), ok=True),
        says(f"The command printed: {out}"),
    ]


CODEX: dict[str, tuple[Expected, str | None, str | None]] = {
    "basic": (
        _codex_echo(
            "Please run `echo hello-from-tool`.", "6ce130fb", "hello-from-tool"
        ),
        None,
        None,
    ),
    "no-tools": (
        [
            user("no-tools: what is 2 + 2?"),
            says("Plain answer without tools: 2 + 2 = 4."),
        ],
        None,
        None,
    ),
    "several-tools": (
        [
            user("several-tools: show notes.md and count its lines."),
            calls(("call_fake_7e2d0e4c_0_0", "exec_command", cmd("cat notes.md"))),
            result(
                "call_fake_7e2d0e4c_0_0",
                exec_output(0, "# Notes\nfixture notes line 2\n"),
                ok=True,
            ),
            calls(("call_fake_7e2d0e4c_1_0", "exec_command", cmd("wc -l notes.md"))),
            result("call_fake_7e2d0e4c_1_0", exec_output(0, "2 notes.md\n"), ok=True),
            says("notes.md: 2 notes.md"),
        ],
        None,
        None,
    ),
    "parallel-tools": (
        [
            user("parallel-tools: echo one and two."),
            thinks("Run both echoes at once."),
            calls(
                ("call_fake_f448761e_0_0", "exec_command", cmd("echo one")),
                ("call_fake_f448761e_0_1", "exec_command", cmd("echo two")),
            ),
            result("call_fake_f448761e_0_0", exec_output(0, "one\n"), ok=True),
            result("call_fake_f448761e_0_1", exec_output(0, "two\n"), ok=True),
            says("Ran two commands in parallel."),
        ],
        None,
        None,
    ),
    "failing-tool": (
        [
            user("failing-tool: list /nonexistent-dir."),
            calls(
                ("call_fake_eb407d48_0_0", "exec_command", cmd("ls /nonexistent-dir"))
            ),
            result(
                "call_fake_eb407d48_0_0",
                re.compile(
                    "Error: "
                    + exec_output(
                        2,
                        "ls: cannot access '/nonexistent-dir': "
                        "No such file or directory\n",
                    ).pattern
                ),
                ok=False,
            ),
            says("The directory does not exist."),
        ],
        None,
        None,
    ),
    "api-error": (
        [user("api-error: this request will fail.")],
        "error",
        '{"error": {"message": "fake model: scripted failure for this fixture", '
        '"type": "invalid_request_error", "code": null}}',
    ),
    "stream-error": (
        [user("stream-error: the stream will fail.")],
        "error",
        "stream disconnected before completion: fake model: scripted stream failure",
    ),
    "long-output": (
        [
            user("long-output: count to 3000."),
            calls(("call_fake_519e1d06_0_0", "exec_command", cmd("seq 1 3000"))),
            result(
                "call_fake_519e1d06_0_0",
                re.compile(
                    exec_output(0, "Warning: truncated output").pattern
                    + r"(?s:.*)\n3000\n"
                ),
                ok=True,
            ),
            says("Printed 3000 numbers."),
        ],
        None,
        None,
    ),
    "image": (
        [
            user(
                '<image name=[Image #1] path="pixel.png">\n[image]\n</image>\n'
                "no-tools: what is in this image?",
                images=[PIXEL],
            ),
            says("Plain answer without tools: 2 + 2 = 4."),
        ],
        None,
        None,
    ),
    # view_image answers with the picture alone (an input_image part).
    "view-image": (
        [
            user("view-image: look at pixel.png."),
            calls(("call_fake_aedb2ef7_0_0", "view_image", '{"path": "pixel.png"}')),
            result("call_fake_aedb2ef7_0_0", "[image]", images=[PIXEL]),
            says("The image is a tiny 2x2 picture."),
        ],
        None,
        None,
    ),
    # SIGINT while the answer streamed: nothing of it was kept, and the
    # "<turn_aborted>" user message Codex writes for the model is not the user.
    "interrupt": (
        [user("slow-answer: write a long essay.")],
        "aborted",
        "interrupted",
    ),
    # Compacted in the middle of the turn: the summary Codex asked the model
    # for is written as an assistant message, and is not the answer.
    "auto-compact": (
        [
            user("Run `echo before-compaction`."),
            thinks("I should run `echo before-compaction`."),
            calls(
                (
                    "call_fake_4e5fdd28_0_0",
                    "exec_command",
                    cmd("echo before-compaction"),
                )
            ),
            result(
                "call_fake_4e5fdd28_0_0", exec_output(0, "before-compaction\n"), ok=True
            ),
            says("Done, going on from the summary."),
        ],
        None,
        None,
    ),
    "resume": (
        _codex_echo(
            "Resumed with --last: run `echo second-turn`.", "47315f93", "second-turn"
        ),
        None,
        None,
    ),
}


def mismatches(
    records: Sequence[Mapping[str, object]],
    expected: Expected,
    any_order: bool = False,
    ignore_ids: bool = False,
) -> list[str]:
    """How ``records`` (timestamps dropped, the meta record skipped) differ.

    With ``any_order``, results of parallel calls may come in any order (they
    are written as the tools finish, which varies from run to run). With
    ``ignore_ids``, tool-call ids are not compared (Gemini CLI makes them from
    the clock), only that each result answers the call at its place.
    """
    got: list[dict[str, Any]] = [
        {k: v for k, v in r.items() if k != "timestamp"}
        for r in records
        if r["role"] != "meta"
    ]
    if any_order:
        got, expected = _by_call(got), _by_call(expected)
    if ignore_ids:
        got, expected = _numbered(got), _numbered(expected)
    problems: list[str] = []
    if len(got) != len(expected):
        problems.append(f"{len(got)} records, expected {len(expected)}")
    for index, (have, want) in enumerate(zip(got, expected, strict=False)):
        if set(have) != set(want):
            problems.append(f"record {index}: keys {sorted(have)} != {sorted(want)}")
            continue
        for key, value in want.items():
            actual = have[key]
            if isinstance(value, re.Pattern):
                if not isinstance(actual, str) or value.fullmatch(actual) is None:
                    problems.append(
                        f"record {index}: {key} {actual!r:.200} "
                        f"!~ {value.pattern!r:.200}"
                    )
            elif actual != value:
                problems.append(
                    f"record {index}: {key} {actual!r:.200} != {value!r:.200}"
                )
    return problems


def _by_call(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``records`` with each run of consecutive tool results sorted by call id."""
    out: list[dict[str, Any]] = []
    run: list[dict[str, Any]] = []
    for record in [*records, {"role": "end"}]:
        if record["role"] == "tool":
            run.append(record)
            continue
        out += sorted(run, key=lambda r: str(r.get("tool_call_id")))
        run = []
        out.append(record)
    return out[:-1]


def _numbered(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``records`` with each tool-call id replaced by its number of appearance."""
    numbers: dict[str, str] = {}
    out: list[dict[str, Any]] = []
    for record in records:
        record = dict(record)
        if record.get("tool_calls"):
            record["tool_calls"] = [
                {**c, "id": numbers.setdefault(c["id"], f"call-{len(numbers)}")}
                for c in record["tool_calls"]
            ]
        if "tool_call_id" in record:
            record["tool_call_id"] = numbers.get(record["tool_call_id"], "unpaired")
        out.append(record)
    return out


def _gemini_read(call: str, out: str) -> Expected:
    return [
        thinks("I should read notes.md."),
        calls((call, "read_file", '{"file_path":"notes.md"}')),
        result(call, out, ok=True),
    ]


NOTES_TEXT = "# Notes\nfixture notes line 2\n"
GEMINI: dict[str, tuple[Expected, str | None, str | None]] = {
    "basic": (
        [
            user("Please read the notes."),
            *_gemini_read("read_file__read_file_1796170566490_0", NOTES_TEXT),
            says("The tools said: # Notes"),
        ],
        None,
        None,
    ),
    "no-tools": (
        [
            user("no-tools: what is 2 + 2?"),
            says("Plain answer without tools: 2 + 2 = 4."),
        ],
        None,
        None,
    ),
    "parallel-tools": (
        [
            user("parallel-tools: read notes.md and list the folder."),
            thinks("Read the notes and list the folder."),
            calls(
                (
                    "read_file__read_file_1796170578608_0",
                    "read_file",
                    '{"file_path":"notes.md"}',
                ),
                (
                    "list_directory__list_directory_1796170578798_1",
                    "list_directory",
                    '{"dir_path":"."}',
                ),
            ),
            result("read_file__read_file_1796170578608_0", NOTES_TEXT, ok=True),
            result(
                "list_directory__list_directory_1796170578798_1",
                re.compile(
                    r"Directory listing for \S+:\n"
                    r"notes\.md \(29 bytes\)\n\n\(1 ignored\)"
                ),
                ok=True,
            ),
            says(re.compile(r"The tools said: # Notes; Directory listing for \S+:")),
        ],
        None,
        None,
    ),
    "failing-tool": (
        [
            user("failing-tool: read missing.txt."),
            thinks("I should read missing.txt."),
            calls(
                (
                    "read_file__read_file_1796170584929_0",
                    "read_file",
                    '{"file_path":"missing.txt"}',
                )
            ),
            result(
                "read_file__read_file_1796170584929_0",
                re.compile(r"Error: File not found: \S+/missing\.txt"),
                ok=False,
            ),
            says(re.compile(r"It failed: File not found: \S+/missing\.txt")),
        ],
        None,
        None,
    ),
    # Gemini CLI takes a prompt whose request failed back out of the session
    # ($set of messages): the turn before it is the last one.
    "api-error": (
        [
            user("no-tools: before the error."),
            says("Plain answer without tools: 2 + 2 = 4."),
        ],
        None,
        None,
    ),
    "resume": (
        [
            user("Resumed: please read the notes."),
            *_gemini_read("read_file__read_file_1796170614843_0", NOTES_TEXT),
            says("The tools said: # Notes"),
        ],
        None,
        None,
    ),
}
