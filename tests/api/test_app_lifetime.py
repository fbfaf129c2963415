"""An app made, served and closed is freed: nothing global keeps it (FastAPI caches its
endpoints by the thousand, so an endpoint that closed over the app kept every one a
process made alive, and a test process makes hundreds)."""

from __future__ import annotations

import gc
import weakref
from pathlib import Path

from fastapi.testclient import TestClient

from clotho.api.app import create_app
from mnemosyne import Store

TOKEN = "t" * 32


def test_an_app_closed_is_freed(tmp_path: Path) -> None:
    store = Store.open(f"sqlite:///{tmp_path / 'app.db'}", migrate=True)
    app = create_app(store=store, token=TOKEN)
    with TestClient(app, base_url="http://127.0.0.1") as client:
        assert client.get("/api/health").status_code == 200
        assert client.get("/docs").status_code == 200
        headers = {"Authorization": f"Bearer {TOKEN}"}
        assert client.get("/api/sessions", headers=headers).status_code == 200
    store.close()
    made = weakref.ref(app)
    del app, client
    gc.collect()
    assert made() is None
