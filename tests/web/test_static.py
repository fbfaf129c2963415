"""The page's files as the API serves them (no browser): the page at `/` with a strict
Content-Security-Policy, its modules under `/static`, the vendored d3 as published, and
every module the page imports present."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from fastapi.testclient import TestClient

from clotho.api import create_app
from clotho.settings import Settings
from clotho.web import STATIC
from mnemosyne import Store

D3_SHA256 = "912111098ea99503a6f4967361d2bbdc9dbf58cf9c678c8e27e5b02d1a07f0c1"


def test_the_vendored_d3_is_the_published_file() -> None:
    data = (STATIC / "vendor" / "d3.min.js").read_bytes()
    assert hashlib.sha256(data).hexdigest() == D3_SHA256
    assert data.startswith(b"// https://d3js.org v7.9.2")
    assert D3_SHA256 in (STATIC / "vendor" / "README.md").read_text()


def test_every_import_of_the_page_is_a_file_it_ships() -> None:
    imports = set()
    for module in STATIC.glob("*.js"):
        for name in re.findall(r'from "\./([\w.-]+)"', module.read_text()):
            imports.add(name)
            assert (STATIC / name).is_file(), f"{module.name} imports {name}, which is missing"
    assert {"api.js", "ui.js", "chat.js", "tree.js", "panels.js"} <= imports
    page = (STATIC / "index.html").read_text()
    for src in re.findall(r'(?:src|href)="/static/([^"]+)"', page):
        assert (STATIC / src).is_file(), f"index.html loads {src}, which is missing"


def test_the_api_serves_the_page_without_a_token(tmp_path: Path) -> None:
    settings = Settings(
        data_dir=tmp_path / "data",
        vectors=False,
        api_token="t0ken-abcdef",
        allowed_hosts=["testserver"],  # the Host of TestClient's requests
    )
    with (
        Store.open(f"sqlite:///{tmp_path / 'c.db'}") as store,
        TestClient(create_app(settings, store=store, token="t0ken-abcdef")) as client,
    ):
        page = client.get("/")
        assert page.status_code == 200
        assert page.headers["content-type"].startswith("text/html")
        policy = page.headers["content-security-policy"]
        assert "default-src 'self'" in policy and "script-src 'self'" in policy
        assert '<script type="module" src="/static/main.js">' in page.text
        assert "t0ken-abcdef" not in page.text  # the page holds no secret
        module = client.get("/static/main.js")
        assert module.status_code == 200
        assert "javascript" in module.headers["content-type"]
        assert client.get("/static/vendor/d3.min.js").status_code == 200
        assert client.get("/static/../__init__.py").status_code == 404
        # The API itself still needs the token.
        assert client.get("/api/sessions").status_code == 401
