from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from machine_git.agents import student
from machine_git.core.errors import StudentError
from machine_git.core.errors import UsageError
from machine_git.store import settings
from machine_git.store.store import Store
from tests.agents import conftest as oai_stub
from tests.conftest import git

INKLING = "thinkingmachines/Inkling-Small:peft:262144"
CHECKPOINT = "tinker://0a1b-run:train:0/sampler_weights/000080"


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store.create(tmp_path / "store", tmp_path)


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        (INKLING, "base"),
        ("Qwen/Qwen3-8B", "base"),
        (CHECKPOINT, "checkpoint"),
        (f"{INKLING};{CHECKPOINT}", "checkpoint"),
        ("BR-001", "release"),
    ],
)
def test_handles(text: str, kind: str) -> None:
    assert student.parse(f" {text} ") == student.Handle(text, kind)


@pytest.mark.parametrize(
    "text", ["Inkling", "tinker://run", "BR-1", "a/b c", f"{INKLING};{INKLING}", ""]
)
def test_not_handles(text: str) -> None:
    with pytest.raises(UsageError, match="is not a student handle: expected"):
        student.parse(text)


def test_a_training_checkpoint_cannot_be_sampled() -> None:
    with pytest.raises(UsageError) as caught:
        student.parse("tinker://run/weights/000080")
    assert str(caught.value) == (
        "'tinker://run/weights/000080' is a weights checkpoint; only "
        "sampler_weights checkpoints can be sampled"
    )


def test_choosing_a_student_is_one_commit(store: Store) -> None:
    assert student.current(store) == {
        "student": None,
        "student_release": None,
        "chat": "work",
        "work_model": None,
        "chat_session": None,
    }
    student.choose(
        store, student.parse(INKLING), "anthropic/claude-sonnet-4-5", "/s/a.jsonl"
    )
    assert student.current(store) == {
        "student": INKLING,
        "student_release": None,
        "chat": "student",
        "work_model": "anthropic/claude-sonnet-4-5",
        "chat_session": "/s/a.jsonl",
    }
    log = git(store.path, "log", "-1", "--format=%s%n%(trailers)")
    assert log == (
        f"student {INKLING}\n"
        "Machine-Action: setting\n"
        "Machine-Setting: student, chat, student_release, work_model, "
        "chat_session\n\n"
    )
    assert student.choose(store, student.parse(INKLING)) is None  # nothing new
    assert student.back_to_work(store) is not None
    assert student.back_to_work(store) is None
    assert student.current(store)["chat"] == "work"
    assert settings.read(store).auto is False  # other settings are kept
    stored = orjson.loads(git(store.path, "show", "HEAD:settings.json"))
    assert stored == {
        "chat": "work",
        "chat_session": "/s/a.jsonl",
        "student": INKLING,
        "student_release": None,
        "work_model": "anthropic/claude-sonnet-4-5",
    }


def test_a_work_model_names_provider_and_model(store: Store) -> None:
    with pytest.raises(UsageError, match="expected PROVIDER/MODEL"):
        student.choose(store, student.parse(INKLING), "claude")


def test_ask_sends_the_handle_and_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TINKER_API_KEY", "tml-test")
    with oai_stub.serve() as stub:
        monkeypatch.setenv("MACHINE_TINKER_OAI_URL", stub.url + "/")
        answer = student.ask(student.parse(CHECKPOINT), "2+2?", max_tokens=16)
    assert answer == "Four."
    assert stub.requests == [
        {
            "path": "/oai/api/v1/chat/completions",
            "authorization": "Bearer tml-test",
            "body": {
                "model": CHECKPOINT,
                "messages": [{"role": "user", "content": "2+2?"}],
                "max_tokens": 16,
            },
        }
    ]


def test_ask_reports_a_refusal_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TINKER_API_KEY", "tml-bad")
    with oai_stub.serve() as stub:
        stub.status = 401
        stub.reply = {"error": {"message": "Invalid API\n key"}}
        monkeypatch.setenv("MACHINE_TINKER_OAI_URL", stub.url)
        with pytest.raises(StudentError) as caught:
            student.ask(student.parse(INKLING), "hi")
    assert str(caught.value) == "Tinker refused the request (401): Invalid API key"


def test_ask_without_key_or_service(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TINKER_API_KEY", raising=False)
    with pytest.raises(StudentError) as caught:
        student.ask(student.parse(INKLING), "hi")
    assert str(caught.value) == (
        "TINKER_API_KEY is not set; create a key in the Tinker console and "
        "export TINKER_API_KEY"
    )
    monkeypatch.setenv("TINKER_API_KEY", "tml-test")
    url = oai_stub.closed_port_url()
    monkeypatch.setenv("MACHINE_TINKER_OAI_URL", url)
    with pytest.raises(StudentError) as caught:
        student.ask(student.parse(INKLING), "hi", timeout=2)
    assert str(caught.value).startswith(f"Tinker is unreachable at {url}: [Errno ")
    assert str(caught.value).endswith("] Connection refused")
    with pytest.raises(StudentError, match="BR-001 is a release id; releases cannot"):
        student.ask(student.parse("BR-001"), "hi")


def test_models_lists_what_the_endpoint_offers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TINKER_API_KEY", "tml-test")
    with oai_stub.serve() as stub:
        monkeypatch.setenv("MACHINE_TINKER_OAI_URL", stub.url)
        assert student.list_models() == [
            "Qwen/Qwen3-8B",
            "thinkingmachines/Inkling:peft:262144",
        ]
        stub.models = {"error": "nope"}
        with pytest.raises(StudentError) as caught:
            student.list_models()
    assert str(caught.value) == (
        'Tinker sent a model list machine cannot read: {"error": "nope"}'
    )
    assert stub.requests[0] == {
        "path": "/oai/api/v1/models",
        "authorization": "Bearer tml-test",
        "body": None,
    }


def test_models_says_why_it_cannot_list(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TINKER_API_KEY", raising=False)
    with pytest.raises(StudentError, match=r"^TINKER_API_KEY is not set; create"):
        student.list_models()
    monkeypatch.setenv("TINKER_API_KEY", "tml-test")
    with oai_stub.serve() as stub:
        stub.status = 404
        stub.models = {"error": {"message": "Not found"}}
        monkeypatch.setenv("MACHINE_TINKER_OAI_URL", stub.url)
        with pytest.raises(StudentError) as caught:
            student.list_models()
    assert str(caught.value) == "Tinker refused the request (404): Not found"
    url = oai_stub.closed_port_url()
    monkeypatch.setenv("MACHINE_TINKER_OAI_URL", url)
    with pytest.raises(StudentError) as caught:
        student.list_models(timeout=2)
    assert str(caught.value).startswith(f"Tinker is unreachable at {url}: [Errno ")
