"""machine review in a real browser: Debian's headless Chromium, driven by Selenium.

Selenium gets the chromedriver and browser paths, so Selenium Manager never
downloads anything. The server is the real one (uvicorn on 127.0.0.1); each
test opens the printed link, as a user does. With CI set, a missing browser
fails these tests instead of skipping them.
"""

from __future__ import annotations

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
from machine_git.store.store import Store
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
    """The row the queue shows ("" while a page is loading)."""
    from selenium.common.exceptions import StaleElementReferenceException

    try:
        cards = driver.find_elements("id", "card")
        return str(cards[0].get_attribute("data-row-id")) if cards else ""
    except StaleElementReferenceException:
        return ""


def text_of(driver: Any, selector: str) -> str:
    """The text of the first element ``selector`` finds ("" while loading)."""
    from selenium.common.exceptions import StaleElementReferenceException

    try:
        found = driver.find_elements("css selector", selector)
        return str(found[0].text) if found else ""
    except StaleElementReferenceException:
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
    row_id = browser.find_element("css selector", "#card").get_attribute("data-row-id")
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
