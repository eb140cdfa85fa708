"""Rename, retag and annotate an experiment (PATCH /experiments/{id}, `rollout edit`), at any
status; the list hears of it live; bad input is a 422 naming the field."""

from __future__ import annotations

import pytest

from app import cli
from app.client import RolloutClient

pytestmark = pytest.mark.timeout(60)


def test_patch_renames_retags_and_annotates(client, create_experiment, transition):
    exp = create_experiment("old name", tags=["a", "b"])
    transition(exp["id"], "queued", "running")
    url = f"/api/v1/experiments/{exp['id']}"
    with client.websocket_connect("/api/v1/stream") as ws:
        changed = client.patch(url, json={"name": "new name", "tags": ["b", "c"]})
        assert changed.status_code == 200, changed.text
        body = changed.json()
        assert body["name"] == "new name" and body["tags"] == ["b", "c"]
        assert body["status"] == "running" and body["notes"] is None
        # Messages of the transitions above may arrive first (PostgreSQL delivers them
        # through LISTEN/NOTIFY, after the connect); the edit's own message must follow.
        names = []
        while "new name" not in names and len(names) < 10:
            message = ws.receive_json()
            if message["type"] == "experiment":
                names.append(message["experiment"]["name"])
        assert names[-1] == "new name", names
    noted = client.patch(url, json={"notes": "## Why\n\nlr **too high**"}).json()
    assert noted["notes"] == "## Why\n\nlr **too high**" and noted["tags"] == ["b", "c"]
    assert client.get(url).json()["notes"] == noted["notes"]
    listed = client.get("/api/v1/experiments", params={"tag": "c"}).json()["items"]
    assert [e["id"] for e in listed] == [exp["id"]] and listed[0]["notes"] == noted["notes"]
    assert not client.get("/api/v1/experiments", params={"tag": "a"}).json()["items"]
    assert client.patch(url, json={"notes": None}).json()["notes"] is None

    for bad, field in (({"name": ""}, "name"), ({"name": None}, "name"), ({"bogus": 1}, "bogus")):
        refused = client.patch(url, json=bad)
        assert refused.status_code == 422, bad
        assert field in {f["field"] for f in refused.json()["error"]["fields"]}, refused.text
    assert client.patch("/api/v1/experiments/999", json={"name": "x"}).status_code == 404


def test_rollout_edit(client, create_experiment, monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(
        cli, "RolloutClient", lambda url, token=None: RolloutClient("http://t", http=client)
    )
    exp_id = create_experiment("cli", tags=["x"])["id"]
    notes = tmp_path / "notes.md"
    notes.write_text("- first try\n- lr 3e-4\n")
    assert cli.main(["edit", str(exp_id), "--name", "renamed", "--notes-file", str(notes)]) == 0
    assert capsys.readouterr().out.strip() == f"experiment {exp_id}: renamed  [x]"
    assert cli.main(["edit", str(exp_id), "--no-tags"]) == 0
    assert cli.main(["show", str(exp_id)]) == 0
    shown = capsys.readouterr().out
    assert "renamed\n" in shown and "notes\n  - first try\n  - lr 3e-4" in shown
    assert client.get(f"/api/v1/experiments/{exp_id}").json()["tags"] == []
    assert cli.main(["edit", str(exp_id)]) == 2
    assert "nothing to change" in capsys.readouterr().err
