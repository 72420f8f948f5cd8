from __future__ import annotations

from machine_git.review import view
from tests.helpers import traces_row
from tests.helpers import train_row


def test_a_trajectory_pairs_each_call_with_its_result() -> None:
    items = view.items(traces_row())
    assert [i["role"] for i in items] == [
        "meta",
        "user",
        "reasoning",
        "calls",
        "assistant",
    ]
    calls = items[3]["calls"]
    assert calls == [
        {
            "id": "c1",
            "name": "bash",
            "args": '{\n  "command": "ls"\n}',
            "result": {"text": "a.py", "error": False, "lines": 1, "images": []},
        }
    ]
    assert items[-1]["final"] is True and items[-1]["text"] == "Fixed."
    assert items[0]["text"] == "source: pi · model: fake-1 · cwd: /p"


def test_a_failed_result_marks_its_call() -> None:
    row = traces_row()
    row["trajectory"][4].update(ok=False, content="Error: no such file")
    calls = view.items(row)[3]
    assert calls["error"] is True
    assert calls["calls"][0]["result"] == {
        "text": "Error: no such file",
        "error": True,
        "lines": 1,
        "images": [],
    }


def test_chat_messages_in_openai_shape_read_the_same() -> None:
    row = train_row(
        messages=[
            {"role": "user", "content": "ls"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "bash", "arguments": "not json"},
                    }
                ],
            },
            {"role": "tool", "content": "a.py", "tool_call_id": "c1", "name": "bash"},
            {"role": "tool", "content": "stray", "tool_call_id": "c9"},
            {"role": "assistant", "content": "One file."},
        ]
    )
    items = view.items(row)
    assert [i["role"] for i in items] == ["user", "calls", "tool", "assistant"]
    assert items[1]["calls"][0]["name"] == "bash"
    assert items[1]["calls"][0]["args"] == "not json"  # shown as given
    assert items[2]["text"] == "stray"  # a result whose call is not in the row
    assert view.answer(row) == "One file."


def test_long_text_is_cut_with_a_note() -> None:
    text = "x" * (view.MAX_TEXT + 5)
    assert view.clip(text).endswith("\n… 5 more characters (machine show has them all)")
    assert view.clip("short") == "short"


def test_a_result_counts_its_lines_as_a_reader_does() -> None:
    assert [view.line_count(t) for t in ("", "one", "one\n", "one\ntwo", "a\n\n")] == [
        0,
        1,
        1,
        2,
        2,
    ]
    row = traces_row()
    row["trajectory"][4]["content"] = "a.py\n"
    result = view.items(row)[3]["calls"][0]["result"]
    assert result is not None and result["lines"] == 1
