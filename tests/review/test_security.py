from __future__ import annotations

from pathlib import Path

import pytest
from starlette.testclient import TestClient

from machine_git.review.app import create_app
from machine_git.review.security import CSP
from machine_git.review.security import MAX_BODY
from machine_git.review.security import cookie_name
from machine_git.rows import rows
from machine_git.store.store import Store
from tests.conftest import git
from tests.review.conftest import BASE
from tests.review.conftest import CSRF
from tests.review.conftest import PORT
from tests.review.conftest import TOKEN
from tests.review.conftest import client_for


def anonymous(store: Store, base: str = BASE) -> TestClient:
    """A browser without the cookie (it has not opened the printed link)."""
    app = create_app(store.path, token=TOKEN, port=PORT, csrf=CSRF)
    return TestClient(app, base_url=base, follow_redirects=False)


def head(store: Store) -> str:
    return git(store.path, "rev-parse", "HEAD").strip()


@pytest.mark.parametrize(
    "path", ["/", "/queue", "/browse", "/api/head", "/static/app.js"]
)
def test_every_request_needs_the_token_or_its_cookie(store: Store, path: str) -> None:
    answer = anonymous(store).get(path)
    assert answer.status_code == 403
    assert answer.text == (
        "machine review: open the link that `machine review` printed "
        "(it carries the access token)\n"
    )


def test_the_printed_link_sets_an_httponly_strict_cookie_and_drops_the_token(
    store: Store,
) -> None:
    client = anonymous(store)
    answer = client.get(f"/browse?token={TOKEN}&kind=train")
    assert answer.status_code == 200
    assert answer.headers["set-cookie"] == (
        f"{cookie_name(PORT)}={TOKEN}; HttpOnly; SameSite=Strict; Path=/"
    )
    # The page moves to the same address without the token.
    assert (
        '<meta http-equiv="refresh" content="0;url=/browse?kind=train">' in answer.text
    )
    assert TOKEN not in answer.text.replace(f"{cookie_name(PORT)}={TOKEN}", "")
    assert client.get("/browse?kind=train").status_code == 200  # the cookie now


@pytest.mark.parametrize(
    ("path", "target"),
    [
        ("//evil.example/x", "/evil.example/x"),
        ("///evil.example/x", "/evil.example/x"),
        ("/%2F%2Fevil.example/x", "/evil.example/x"),
        ("/%5C%5Cevil.example/x", "/%5C%5Cevil.example/x"),
        ("/%09/evil.example", "/%09/evil.example"),
        ("/rows/a%3Fb", "/rows/a%3Fb"),
    ],
)
def test_the_login_only_moves_on_to_a_path_of_this_server(
    store: Store, path: str, target: str
) -> None:
    # a full URL: httpx would read a path starting "//" as a host
    answer = anonymous(store).get(f"{BASE}{path}?token={TOKEN}&q=1")
    assert answer.status_code == 200
    assert f'content="0;url={target}?q=1"' in answer.text
    assert f'<a href="{target}?q=1">continue</a>' in answer.text


def test_a_wrong_token_or_cookie_is_refused(store: Store) -> None:
    client = anonymous(store)
    assert client.get("/?token=guess").status_code == 403
    assert "set-cookie" not in client.get("/?token=guess").headers
    client.cookies.set(cookie_name(PORT), "guess")
    assert client.get("/queue").status_code == 403
    # Another local app's odd cookie beside ours does not hide ours.
    mixed = anonymous(store)
    mixed.cookies.set("_xsrf", '2|"a b",c')
    mixed.cookies.set(cookie_name(PORT), TOKEN)
    assert mixed.get("/queue").status_code == 200
    # A cookie for another port's server is not this one's.
    other = anonymous(store)
    other.cookies.set(cookie_name(PORT + 1), TOKEN)
    assert other.get("/queue").status_code == 403


@pytest.mark.parametrize(
    "host",
    [
        "evil.example:8765",  # DNS rebinding: the attacker's name, our address
        "127.0.0.1:9999",  # another port
        "127.0.0.1",
        "0.0.0.0:8765",
        "192.168.1.5:8765",
    ],
)
def test_a_host_that_is_not_our_loopback_address_is_refused(
    store: Store, host: str
) -> None:
    client = client_for(store)
    answer = client.get("/queue", headers={"host": host})
    assert answer.status_code == 403
    assert answer.text == "machine review: wrong Host header (only loopback)\n"
    # Even with the token in the URL: no cookie is handed to another name.
    answer = client.get(f"/?token={TOKEN}", headers={"host": host})
    assert answer.status_code == 403
    assert "set-cookie" not in answer.headers


def test_localhost_on_our_port_is_our_address(store: Store) -> None:
    client = client_for(store)
    answer = client.get("/queue", headers={"host": f"localhost:{PORT}"})
    assert answer.status_code == 200


def test_posts_need_the_csrf_token(store: Store) -> None:
    client = client_for(store, follow_redirects=False)
    before = head(store)
    form = {"head": before, "back": "/queue"}
    missing = client.post("/undo", data=form)
    assert missing.status_code == 403
    assert missing.text == "machine review: missing or wrong CSRF token\n"
    wrong = client.post("/undo", data={**form, "csrf": "guess"})
    assert wrong.status_code == 403
    assert head(store) == before  # nothing was undone
    done = client.post("/undo", data={**form, "csrf": CSRF})
    assert done.status_code == 303
    assert head(store) != before


def test_a_post_from_another_origin_is_refused_even_with_the_token(
    store: Store,
) -> None:
    client = client_for(store)
    before = head(store)
    answer = client.post(
        "/undo",
        data={"csrf": CSRF, "head": before},
        headers={"origin": "http://evil.example"},
    )
    assert answer.status_code == 403
    assert answer.text == "machine review: cross-origin request refused\n"
    assert head(store) == before


def test_only_small_form_posts_and_get_are_accepted(store: Store) -> None:
    client = client_for(store)
    as_json = client.post("/undo", json={"csrf": CSRF})
    assert as_json.status_code == 415
    huge = client.post("/undo", data={"csrf": CSRF, "x": "a" * (MAX_BODY + 1)})
    assert huge.status_code == 413
    for method in ("PUT", "DELETE", "PATCH"):
        assert client.request(method, "/undo").status_code == 405


def test_every_response_forbids_inline_script_framing_and_referers(
    store: Store,
) -> None:
    client = client_for(store, follow_redirects=False)
    answers = [
        client.get("/queue"),
        client.get("/static/app.css"),
        client.get("/api/head"),
        client.get("/rows/ffffffffffff"),  # an error page
        anonymous(store).get("/queue"),  # a refusal
    ]
    for answer in answers:
        assert answer.headers["content-security-policy"] == CSP
        assert answer.headers["x-frame-options"] == "DENY"
        assert answer.headers["referrer-policy"] == "same-origin"
        assert answer.headers["x-content-type-options"] == "nosniff"
    assert "script-src 'self';" in CSP and "unsafe-inline" not in CSP
    assert "default-src 'none'" in CSP


def test_pages_load_no_script_or_style_from_elsewhere(client: TestClient) -> None:
    for path in ("/queue", "/browse", "/diff", "/versions", "/runs", "/releases"):
        html = client.get(path).text
        assert "http://" not in html and "https://" not in html, path
        assert "<script>" not in html and "style=" not in html, path


# Every route, with a URL that reaches it. A new route must be added here.
PAGES = {
    "/": "/",
    "/queue": "/queue",
    "/queue/list": "/queue/list",
    "/browse": "/browse?q=notes",
    "/browse/table": "/browse/table?kind=train",
    "/rows/{row}": "/rows/{row}",
    "/rows/{row}/history": "/rows/{row}/history",
    "/rows/{row}/images/{sha}": "/rows/{row}/images/" + "ab" * 32,
    "/diff": "/diff?a=v1",
    "/versions": "/versions",
    "/runs": "/runs",
    "/runs/{run}": "/runs/train-00000000-000000",
    "/releases": "/releases",
    "/releases/{release}": "/releases/BR-001",
    "/api/head": "/api/head?row={row}",
    "/static": "/static/app.js",
}
ACTIONS = {
    "/queue/label": "/queue/label",
    "/queue/rewrite": "/queue/rewrite",
    "/queue/bulk": "/queue/bulk",
    "/queue/labels": "/queue/labels",
    "/undo": "/undo",
    "/redo": "/redo",
    "/rows/{row}/{action}": "/rows/{row}/rewrite",
}


def test_every_route_is_listed_here(store: Store) -> None:
    app = create_app(store.path, token=TOKEN, port=PORT, csrf=CSRF)
    routes = {str(r.path) for r in app.app.routes}  # type: ignore[attr-defined]
    assert routes == set(PAGES) | set(ACTIONS)


def any_row(store: Store) -> str:
    path, _ = next(iter(store.iter_row_blobs()))
    row_id = rows.id_of_path(path)
    assert row_id is not None
    return row_id


@pytest.mark.parametrize("route", sorted(PAGES))
def test_every_page_answers_only_with_the_cookie(store: Store, route: str) -> None:
    url = PAGES[route].format(row=any_row(store))
    answer = client_for(store, follow_redirects=False).get(url)
    assert answer.status_code in (200, 303, 404), (url, answer.text)
    assert answer.headers["content-security-policy"] == CSP
    assert anonymous(store).get(url).status_code == 403


@pytest.mark.parametrize("route", sorted(ACTIONS))
def test_every_action_needs_the_cookie_and_the_csrf_token(
    store: Store, route: str
) -> None:
    url = ACTIONS[route].format(row=any_row(store))
    before = head(store)
    assert anonymous(store).post(url, data={"csrf": CSRF}).status_code == 403
    assert client_for(store).post(url, data={"verdict": "good"}).status_code == 403
    assert client_for(store).get(url).status_code == 405
    assert head(store) == before


def test_every_page_of_a_store_with_no_rows_yet(tmp_path: Path) -> None:
    empty = Store.create(tmp_path / "empty-store", tmp_path)
    client = client_for(empty)
    for route, url in PAGES.items():
        if "{row}" in route:
            continue
        answer = client.get(url.format(row=""))
        assert answer.status_code in (200, 404), (url, answer.text)
    assert "Nothing to review" in client.get("/queue").text
    assert "0 of 0 rows now" in client.get("/browse").text
    assert "added <code>machine.json</code>" in client.get("/diff").text
