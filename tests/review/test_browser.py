"""machine review in a real browser: Debian's headless Chromium, driven by Selenium.

Selenium gets the chromedriver and browser paths, so Selenium Manager never
downloads anything. The server is the real one (uvicorn on 127.0.0.1); each
test opens the printed link, as a user does. With CI set, a missing browser
fails these tests instead of skipping them.
"""

from __future__ import annotations

import copy
import json
import os
import sys
import threading
import time
from collections.abc import Callable
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from machine_git.review.app import create_app
from machine_git.review.server import listen
from machine_git.rows import rows
from machine_git.store.store import Redaction
from machine_git.store.store import Store
from machine_git.tagging import labels as labeling
from machine_git.tagging import turns
from tests.conftest import PI_SESSIONS
from tests.conftest import git
from tests.review.conftest import TOKEN
from tests.review.conftest import machine
from tests.review.conftest import same_run_elsewhere

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1400,900",
)
WAIT = 15.0  # seconds for anything to appear (the box may be busy)

pytestmark = pytest.mark.slow


def _missing() -> list[str]:
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.exists()]
    try:
        import selenium  # noqa: F401
    except ImportError:
        missing.append("the selenium package")
    return missing


def require_browser() -> None:
    """Skip without a browser; with CI set, fail: these tests must run there."""
    missing = _missing()
    if missing:
        reason = (
            f"{', '.join(missing)} not found: the browser tests need Debian's "
            "chromium and chromium-driver (apt-get install chromium chromium-driver)"
        )
        if os.environ.get("CI"):
            pytest.fail(f"{reason} (CI is set: these tests must run)")
        pytest.skip(reason)


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Any]:
    require_browser()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (*FLAGS, f"--user-data-dir={tmp_path / 'chromium-profile'}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    try:
        yield driver
    finally:
        driver.quit()


class Served:
    """The review server on a free loopback port, in a thread."""

    def __init__(self, store: Store) -> None:
        sock = listen(0)
        self.port = int(sock.getsockname()[1])
        app = create_app(store.path, token=TOKEN, port=self.port, project="demo")
        config = uvicorn.Config(app, log_level="warning", lifespan="off")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [sock]}, daemon=True
        )
        self.thread.start()
        until(lambda: self.server.started)
        self.url = f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


@pytest.fixture
def served(store: Store) -> Iterator[Served]:
    running = Served(store)
    yield running
    running.stop()


@pytest.fixture
def served_demo(demo: tuple[Store, str]) -> Iterator[tuple[Served, str]]:
    running = Served(demo[0])
    yield running, demo[1]
    running.stop()


def until(check: Callable[[], Any], what: str = "the page") -> Any:
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")  # pragma: no cover


def login(driver: Any, served: Served, path: str = "/queue") -> None:
    """Open the printed link; the page moves on to the address without the token."""
    driver.get(f"{served.url}{path}?token={TOKEN}")
    until(lambda: driver.current_url == f"{served.url}{path}", "the login")
    until(lambda: driver.execute_script("return document.readyState") == "complete")


def card_id(driver: Any) -> str:
    """The row the queue shows ("" while a page is loading).

    Read in one script call: between finding the card and asking for its
    attribute the page may replace it, and Chromium then reports an
    unknown-node error rather than a stale element.
    """
    found = driver.execute_script(
        "const card = document.getElementById('card');"
        "return card ? (card.getAttribute('data-row-id') || '') : '';"
    )
    return str(found or "")


def text_of(driver: Any, selector: str) -> str:
    """The text of the first element ``selector`` finds ("" while loading)."""
    from selenium.common.exceptions import WebDriverException

    try:
        found = driver.find_elements("css selector", selector)
        return str(found[0].text) if found else ""
    except WebDriverException:
        # Stale, or Chromium's "does not belong to the document": the page
        # swapped the node between the two calls; the next poll reads anew.
        return ""


def showing(driver: Any, row_id: str) -> bool:
    return card_id(driver) == row_id


def press(driver: Any, keys: str) -> None:
    """Type ``keys`` once the page's script is running (it binds the keys)."""
    from selenium.webdriver.common.action_chains import ActionChains

    until(lambda: driver.execute_script("return document.readyState") == "complete")
    ActionChains(driver).send_keys(keys).perform()


def errors_in_console(driver: Any) -> list[str]:
    """Console errors: a CSP violation or a failing script would show here."""
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def screenshot(driver: Any, folder: Path, name: str) -> Path:
    """A PNG of the whole page (up to 2,400 px tall)."""
    height, chrome = driver.execute_script(
        "return [document.documentElement.scrollHeight,"
        " window.outerHeight - window.innerHeight]"
    )
    driver.set_window_size(1400, min(max(int(height), 760), 2400) + int(chrome))
    folder.mkdir(exist_ok=True)
    target = folder / f"{name}.png"
    assert driver.save_screenshot(str(target))
    driver.set_window_size(1400, 900)
    return target


def test_label_three_rows_rewrite_one_and_undo_from_the_keyboard(
    browser: Any, served: Served, store: Store, tmp_path: Path
) -> None:
    login(browser, served)
    order = [
        a.get_attribute("href").rsplit("=", 1)[1]
        for a in browser.find_elements("css selector", ".queue-list a")
    ]
    assert len(order) == 6 and card_id(browser) == order[0]
    screenshot(browser, tmp_path / "screenshots", "queue")
    # n, p and s move through the queue without judging anything.
    for key, after in (
        ("n", order[1]),
        ("p", order[0]),
        ("s", order[1]),
        ("p", order[0]),
    ):
        press(browser, key)
        until(partial(showing, browser, after), f"row {after} after {key}")
    press(browser, "t")  # thinking shown on request
    assert "show-thinking" in browser.find_element("tag name", "body").get_attribute(
        "class"
    )
    for key, row_id, after in (
        ("g", order[0], order[1]),
        ("b", order[1], order[2]),
        ("g", order[2], order[3]),
    ):
        assert card_id(browser) == row_id
        press(browser, key)
        until(partial(showing, browser, after), f"row {after} after {key}")
    # r: the editor opens with the answer; Ctrl+Enter saves it as --as (good).
    press(browser, "r")
    editor = browser.find_element("id", "rewrite-text")
    until(lambda: editor.is_displayed(), "the editor")
    original = editor.get_attribute("value")
    assert original and browser.switch_to.active_element == editor
    editor.clear()
    editor.send_keys("Run it once, then report the output.")
    from selenium.webdriver.common.keys import Keys

    editor.send_keys(Keys.CONTROL, Keys.ENTER)
    until(lambda: card_id(browser) == order[4], "the next row after the rewrite")
    rewritten = store.read_row(order[3])
    assert rewritten is not None and rewritten["kind"] == "traces"
    assert rewritten["original_answer"] == original
    # u: undo the rewrite; the row is back in the queue, as it was.
    press(browser, "u")
    until(lambda: card_id(browser) == order[3], "the undone row")
    undone = store.read_row(order[3])
    assert undone is not None and undone["kind"] == "observed"
    assert "original_answer" not in undone
    log = git(
        store.path,
        "log",
        "-5",
        "--format=%s%n%(trailers:key=Machine-Action,key=Machine-Row,key=Machine-Kind)--",
    )
    entries = [e.strip().splitlines() for e in log.split("--")[:5]]
    assert [e[0].split(":")[0] for e in entries] == [
        "undo",
        f"label {order[3]} observed -> traces",
        f"label {order[2]} observed -> traces",
        f"label {order[1]} observed -> rejected",
        f"label {order[0]} observed -> traces",
    ]
    assert entries[1][1:] == [
        "Machine-Action: label",
        f"Machine-Row: {order[3]}",
        "Machine-Kind: traces",
    ]
    assert entries[0][1:3] == ["Machine-Action: undo", f"Machine-Row: {order[3]}"]
    kinds = [store.read_row(i)["kind"] for i in order[:3]]  # type: ignore[index]
    assert kinds == ["traces", "rejected", "traces"]
    assert errors_in_console(browser) == []


def test_a_diff_and_a_run_page_show_what_changed_and_the_curves(
    browser: Any,
    served_demo: tuple[Served, str],
    demo: tuple[Store, str],
    tmp_path: Path,
) -> None:
    served, run_id = served_demo
    login(browser, served, "/diff")
    browser.get(f"{served.url}/diff?a=v1&b=v2&kind=rejected")
    assert browser.find_element("id", "diff-total").text == "1 row changed"
    change = browser.find_element("css selector", "section.change.modified")
    paths = [c.text for c in change.find_elements("css selector", "td.path code")]
    assert paths == ["$.messages[1].content", "$.original_answer"]
    first = change.find_elements("css selector", "table.fields tbody tr")[0]
    before, after = first.find_elements("css selector", "pre.value")
    assert after.text == (
        "notes.md starts with a '# Notes' header; /nonexistent-dir does not exist."
    )
    assert before.text.startswith('notes.md starts with "# Notes". The command')
    marked = [s.text for s in after.find_elements("css selector", "span.ins")]
    assert "' header;" in marked
    screenshot(browser, tmp_path / "screenshots", "diff")
    browser.get(f"{served.url}/runs/{run_id}")
    until(
        lambda: browser.find_elements("css selector", "[data-chart][data-drawn=true]"),
        "the charts",
    )
    plots = browser.find_elements("css selector", ".uplot canvas")
    assert len(plots) == 6  # one per metric of metrics.jsonl
    titles = [t.text for t in browser.find_elements("css selector", ".uplot .u-title")]
    assert titles[:2] == ["train_mean_nll", "learning_rate"]
    record = json.loads(git(demo[0].path, "show", f"HEAD:runs/{run_id}.json"))
    shown = browser.find_element("id", "final-loss").text
    assert shown == f"{record['final_loss']:.4f}"
    link = browser.find_element("id", "dataset-link").get_attribute("href")
    assert link.startswith(f"{served.url}/browse?at=")
    screenshot(browser, tmp_path / "screenshots", "run")
    assert errors_in_console(browser) == []


def test_new_rows_and_changed_rows_show_without_a_reload(
    browser: Any, served: Served, project: Path, store: Store
) -> None:
    login(browser, served, "/browse")
    browser.execute_script("window.stillThisPage = true")
    before = len(browser.find_elements("css selector", "table.rows tbody tr"))
    machine(
        project, "good", "--trace", "--session", same_run_elsewhere(project, "mixed")
    )
    until(
        lambda: (
            len(browser.find_elements("css selector", "table.rows tbody tr"))
            == before + 1
        ),
        "the new row",
    )
    assert browser.execute_script("return window.stillThisPage") is True
    # A run observed by Pi meanwhile joins the Queue's list, the page stays.
    browser.get(f"{served.url}/queue")
    browser.execute_script("window.stillThisPage = true")
    row_id = card_id(browser)
    listed = len(browser.find_elements("css selector", ".queue-list li"))
    machine(project, "observe", "--session", same_run_elsewhere(project, "multi-turn"))
    until(
        lambda: (
            len(browser.find_elements("css selector", ".queue-list li")) == listed + 1
        ),
        "the new run in the queue",
    )
    assert browser.execute_script("return window.stillThisPage") is True
    assert card_id(browser) == row_id  # the row being read is not yanked away
    # A row open in the queue, labeled from the shell meanwhile: the page says so.
    assert not browser.find_element("id", "stale").is_displayed()
    machine(project, "label", row_id, "bad")
    until(lambda: browser.find_element("id", "stale").is_displayed(), "the notice")
    press(browser, "g")  # refused: the row is not what the page showed
    until(
        lambda: (
            "changed since this page showed it"
            in text_of(browser, ".banner.conflict[role=alert]")
        ),
        "the conflict",
    )
    assert store.read_row(row_id)["kind"] == "rejected"  # type: ignore[index]


def test_a_screenshot_of_every_main_page(
    browser: Any, served_demo: tuple[Served, str], tmp_path: Path
) -> None:
    served, run_id = served_demo
    login(browser, served)
    folder = tmp_path / "screenshots"
    row_id = until(lambda: card_id(browser), "the first row")
    pages = {
        "queue": "/queue",
        "browse": "/browse",
        "row": f"/rows/{row_id}",
        "diff": "/diff?a=v1&b=v2&kind=rejected",
        "versions": "/versions",
        "runs": "/runs",
        "run": f"/runs/{run_id}",
        "release": "/releases/BR-001",
    }
    for name, path in pages.items():
        browser.get(f"{served.url}{path}")
        until(
            lambda: browser.execute_script("return document.readyState") == "complete"
        )
        if browser.find_elements("css selector", "[data-chart]"):
            until(
                lambda: browser.find_elements("css selector", "[data-drawn=true]"),
                "the charts",
            )
        shot = screenshot(browser, folder, name)
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert shot.stat().st_size > 10_000
    assert sorted(p.stem for p in folder.iterdir()) == sorted(pages)
    assert errors_in_console(browser) == []


def test_a_2_mb_rewrite_is_saved_sending_only_what_changed(
    browser: Any, served: Served, store: Store
) -> None:
    from selenium.webdriver.common.keys import Keys

    from tests.review.test_rewrite import long_answer
    from tests.review.test_rewrite import long_row

    answer = long_answer()
    row = long_row(answer)
    turns.commit(store, row, Redaction.CHECK)
    login(browser, served, "/queue")
    browser.get(f"{served.url}/queue?id={row['id']}")
    until(lambda: showing(browser, row["id"]), "the long row")
    # What the page sends, recorded (the page's script calls fetch by name).
    browser.execute_script(
        "const real = window.fetch;"
        "window.fetch = (url, options) => {"
        "  if (options && options.body)"
        "    sessionStorage.setItem('sent', String(String(options.body).length));"
        "  return real(url, options); };"
    )
    press(browser, "r")
    editor = browser.find_element("id", "rewrite-text")
    until(lambda: editor.is_displayed(), "the editor")
    editor.send_keys(" Checked twice.")
    editor.send_keys(Keys.CONTROL, Keys.ENTER)
    until(lambda: not showing(browser, row["id"]), "the next row after the save")
    saved = store.read_row(row["id"])
    assert saved is not None and saved["kind"] == "traces"
    typed = answer.replace("\r\n", "\n")
    assert rows.final_answer(saved) == typed + " Checked twice."
    assert saved["original_answer"] == answer
    sent = browser.execute_script("return sessionStorage.getItem('sent')")
    assert 0 < int(sent) < 2_000  # not the 2 MB the editor held
    assert errors_in_console(browser) == []


def test_a_save_that_fails_keeps_the_text_with_the_error_beside_it(
    browser: Any, served: Served, project: Path, store: Store
) -> None:
    from selenium.webdriver.common.keys import Keys

    login(browser, served)
    row_id = card_id(browser)
    press(browser, "r")
    editor = browser.find_element("id", "rewrite-text")
    until(lambda: editor.is_displayed(), "the editor")
    editor.send_keys(Keys.CONTROL, "a")
    editor.send_keys("An answer typed with care.")
    machine(project, "label", row_id, "bad")  # from the shell meanwhile
    before = git(store.path, "rev-parse", "HEAD").strip()
    editor.send_keys(Keys.CONTROL, Keys.ENTER)
    error = browser.find_element("id", "rewrite-error")
    until(lambda: error.is_displayed(), "the error beside the editor")
    assert error.text.startswith(
        f"Not saved: row {row_id} changed since this page showed it"
    )
    assert error.text.endswith("Your text is still here.")
    assert editor.get_attribute("value") == "An answer typed with care."
    assert editor.is_displayed() and card_id(browser) == row_id
    assert git(store.path, "rev-parse", "HEAD").strip() == before
    # The server stopped: the same, the text stays.
    served.stop()
    editor.send_keys(Keys.CONTROL, Keys.ENTER)
    until(lambda: "did not answer" in error.text, "the second error")
    assert editor.get_attribute("value") == "An answer typed with care."


def test_question_mark_lists_every_shortcut(browser: Any, served: Served) -> None:
    login(browser, served)
    overlay = browser.find_element("id", "keys-overlay")
    assert not overlay.is_displayed()
    press(browser, "?")
    until(lambda: overlay.is_displayed(), "the shortcut list")
    listed = {k.text for k in overlay.find_elements("css selector", "td kbd")}
    bound = set(browser.execute_script("return window.machineReviewKeys"))
    assert bound <= listed  # every key the script binds is listed
    assert {"Ctrl+Enter", "Esc"} <= listed
    press(browser, Keys_ESCAPE())
    until(lambda: not overlay.is_displayed(), "the list to close")
    assert errors_in_console(browser) == []


def Keys_ESCAPE() -> str:
    from selenium.webdriver.common.keys import Keys

    return str(Keys.ESCAPE)


def test_a_filtered_set_labeled_from_the_keyboard_and_undone(
    browser: Any, served: Served, store: Store
) -> None:
    login(browser, served)
    press(browser, "/")
    field = browser.find_element("id", "queue-text")
    until(lambda: browser.switch_to.active_element == field, "the text filter")
    field.send_keys("branch turn\n")
    until(lambda: "q=branch+turn" in browser.current_url, "the filtered queue")
    assert text_of(browser, "#queue-total") == "2 rows"
    matching = [
        a.get_attribute("href").rsplit("=", 1)[1]
        for a in browser.find_elements("css selector", ".queue-list a")
    ]
    before = git(store.path, "rev-parse", "HEAD").strip()
    press(browser, "A")
    press(browser, "B")
    until(lambda: text_of(browser, "#queue-total") == "0 rows", "the labeled set")
    assert git(store.path, "rev-list", "--count", f"{before}..HEAD").strip() == "1"
    assert [store.read_row(i)["kind"] for i in matching] == ["rejected"] * 2  # type: ignore[index]
    assert "label 2 rows observed -> rejected" in text_of(browser, "#undo")
    press(browser, "u")
    until(lambda: text_of(browser, "#queue-total") == "2 rows", "the undone set")
    assert [store.read_row(i)["kind"] for i in matching] == ["observed"] * 2  # type: ignore[index]
    assert "q=branch+turn" in browser.current_url  # the view is kept
    assert "redo makes again" in text_of(browser, "#redo")
    assert errors_in_console(browser) == []


def test_search_finds_words_inside_tool_arguments_and_a_phrase(
    browser: Any, served: Served
) -> None:
    login(browser, served, "/browse")

    def search_for(query: str) -> list[str]:
        before = browser.current_url
        field = browser.find_element("css selector", "input[name=q]")
        field.clear()
        field.send_keys(query + "\n")
        until(lambda: browser.current_url != before, "the results")
        until(
            lambda: browser.execute_script("return document.readyState") == "complete"
        )
        return [
            a.text
            for a in browser.find_elements("css selector", "table.rows td a code")
        ]

    found = search_for("args:nonexistent")
    assert len(found) == 1
    marks = [m.text for m in browser.find_elements("css selector", ".snippet mark")]
    assert marks == ["nonexistent"]
    phrase = search_for('"cannot access"')
    assert len(phrase) == 2 and found[0] in phrase
    assert search_for('"access cannot"') == []
    assert errors_in_console(browser) == []


def test_a_trajectory_diff_shows_calls_not_json(
    browser: Any, served: Served, project: Path, store: Store
) -> None:
    from machine_git.tagging import edits

    row_id = machine(project, "tagged", "--kind", "observed").split()[0]
    row = copy.deepcopy(store.read_row(row_id))
    assert row is not None
    records: list[Any] = row["trajectory"]  # type: ignore[typeddict-item]
    stamp = records[1]["timestamp"]
    records[2:2] = [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call-new",
                    "name": "bash",
                    "args": '{"command":"grep -n \\"TODO\\" notes.md","timeout":5}',
                }
            ],
            "timestamp": stamp,
        },
        {
            "role": "tool",
            "tool_call_id": "call-new",
            "content": "3:TODO check the header\n",
            "ok": True,
            "timestamp": stamp,
        },
    ]
    edits.replace(store, row_id, row)
    login(browser, served, "/diff")
    change = browser.find_element("css selector", f"#change-{row_id}")
    labels = [e.text for e in change.find_elements("css selector", "td.path .label")]
    assert labels == ["record 2"]  # the call and its result: one inserted step
    call = change.find_element("css selector", ".record.ins .call")
    assert call.find_element("css selector", ".tool-name").text == "bash"
    args = call.find_element("css selector", "pre.args").text
    assert args == '{\n  "command": "grep -n \\"TODO\\" notes.md",\n  "timeout": 5\n}'
    summary = call.find_element("css selector", "details.result summary").text
    assert summary == "result · 1 line"
    assert call.find_element("css selector", "pre.output").text == (
        "3:TODO check the header"
    )
    assert '"tool_call_id"' not in change.text  # no raw record JSON
    assert errors_in_console(browser) == []


def test_a_row_page_loads_its_history_after_it_is_shown(
    browser: Any, served: Served
) -> None:
    login(browser, served)
    row_id = card_id(browser)
    browser.get(f"{served.url}/rows/{row_id}")
    until(
        lambda: browser.find_elements("css selector", "#row-history ol.history li"),
        "the history",
    )
    actions = [
        b.text for b in browser.find_elements("css selector", "#row-history li b")
    ]
    assert actions == ["observe"]
    assert errors_in_console(browser) == []


def test_a_custom_schema_rating_category_and_span_from_the_keyboard(
    browser: Any, served: Served, store: Store
) -> None:
    from tests.review.test_labels import SCHEMA

    labeling.set_schema(store, SCHEMA)
    login(browser, served)
    row_id = card_id(browser)

    def labels_now() -> Any:
        row: Any = store.read_row(row_id)
        return row.get("labels") if row is not None else None

    press(browser, "4")  # quality = 4
    until(
        lambda: labels_now() == {"quality": 4},
        "the rating",
    )
    until(
        lambda: text_of(browser, "#label-fields button.chosen").split() == ["4", "4"],
        f"the rating shown, not {text_of(browser, '#label-fields button.chosen')!r}",
    )
    press(browser, "w")  # topic = docs
    until(
        lambda: labels_now() == {"quality": 4, "topic": "docs"},
        "the category",
    )
    assert card_id(browser) == row_id  # still on the row: g or b judges it
    # A span: select words of the answer, press h.
    until(lambda: browser.find_elements("id", "answer-text"), "the answer")
    browser.execute_script(
        "const pre = document.getElementById('answer-text');"
        "const text = pre.firstChild; const at = text.data.indexOf('/nonexistent-dir');"
        "const range = document.createRange(); range.setStart(text, at);"
        "range.setEnd(text, at + 16); const s = window.getSelection();"
        "s.removeAllRanges(); s.addRange(range);"
    )
    press(browser, "h")
    until(
        lambda: browser.find_elements("css selector", "#answer-text mark.span"),
        "the marked span",
    )
    assert text_of(browser, "#answer-text mark.span") == "/nonexistent-dir"
    labels = labels_now()
    assert isinstance(labels, dict)
    assert [s["text"] for s in labels["wrong"]] == ["/nonexistent-dir"]
    assert labels["wrong"][0]["label"] == "made-up"
    log = git(store.path, "log", "-3", "--format=%s").splitlines()
    assert log == [
        f"labels {row_id}: wrong=1 span",
        f"labels {row_id}: topic=docs",
        f"labels {row_id}: quality=4",
    ]
    press(browser, "g")  # and the verdict, as always
    until(lambda: card_id(browser) != row_id, "the next row")
    judged = store.read_row(row_id)
    assert judged is not None and judged["kind"] == "traces"
    assert labels_now()["quality"] == 4
    assert errors_in_console(browser) == []


def test_without_a_browser_ci_fails_and_a_developer_skips(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(sys.modules[__name__], "CHROMIUM", tmp_path / "no-chromium")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="no-chromium not found"):
        require_browser()
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception, match="apt-get install chromium"):
        require_browser()


def test_a_row_s_image_is_displayed_within_the_csp(browser: Any, project: Path) -> None:
    from machine_git.core import paths

    machine(project, "good", "--session", str(PI_SESSIONS / "image.jsonl"))
    store = Store.open(paths.store_path(project))
    row_id = machine(project, "tagged").split()[0]
    running = Served(store)
    try:
        login(browser, running, f"/rows/{row_id}")
        image = until(
            lambda: browser.find_elements("css selector", "img.image"), "the image"
        )[0]
        until(
            lambda: browser.execute_script(
                "return arguments[0].complete && arguments[0].naturalWidth > 0", image
            ),
            "the image to load",
        )
        width = browser.execute_script("return arguments[0].naturalWidth", image)
        assert int(width) == int(str(image.get_attribute("width")))
        assert "image/png" in str(image.get_attribute("alt"))
        assert errors_in_console(browser) == []
    finally:
        running.stop()
