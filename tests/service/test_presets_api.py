"""Presets over HTTP: the tables, resolving a partial config, and experiments storing the
resolved config (SQLite and PostgreSQL through the `client` fixture)."""

from __future__ import annotations

from sqlalchemy import func, select

from app.experiments.models import Experiment
from trainer.config import PPOConfig
from trainer.presets import PRESETS


def test_list_presets_names_sources_and_fields(client):
    response = client.get("/api/v1/presets")
    assert response.status_code == 200
    items = {p["name"]: p for p in response.json()["items"]}
    assert set(items) == set(PRESETS)
    atari = items["atari"]
    assert atari["namespaces"] == ["ALE"] and "CleanRL" in atari["source"]
    assert atari["fields"]["clip_rewards"] == 1.0
    assert atari["fields"]["model.vf_share_layers"] is True
    assert atari["fields"]["env_config.repeat_action_probability"] == 0.0
    acrobot = next(e for e in items["classic_control"]["envs"] if e["env"] == "Acrobot")
    assert acrobot["source"].endswith("Acrobot-v1") and acrobot["fields"]["gae_lambda"] == 0.94
    assert all(p["source"] for p in items.values())


def test_resolve_shows_what_a_config_becomes_and_stores_nothing(client, app):
    body = {"config": {"env_id": "Pendulum-v1", "lr": 0.01, "stop": {"wall_seconds": 60}}}
    response = client.post("/api/v1/presets/resolve", json=body)
    assert response.status_code == 200, response.text
    got = response.json()
    assert got["preset"] == "classic_control_continuous" and got["env_settings"] == "Pendulum"
    assert got["config"]["preset"] == "classic_control_continuous"
    assert got["config"]["lr"] == 0.01 and got["config"]["gamma"] == 0.95
    assert got["config"]["stop"] == {
        "env_steps": 100_000,
        "wall_seconds": 60.0,
        "episode_return_mean": None,
    }
    assert "gamma" in got["preset_fields"] and "stop.env_steps" in got["preset_fields"]
    assert "lr" not in got["preset_fields"] and "stop.wall_seconds" not in got["preset_fields"]
    assert got["sources"][-1].endswith("Pendulum-v1")
    # CartPole: the preset sets nothing, the config is PPOConfig's defaults.
    cartpole = client.post("/api/v1/presets/resolve", json={"config": {}}).json()
    assert cartpole["preset"] == "classic_control" and cartpole["preset_fields"] == []
    assert cartpole["config"] == {**PPOConfig().to_json_dict(), "preset": "classic_control"}
    with app.state.sessionmaker() as session:
        assert session.scalar(select(func.count()).select_from(Experiment)) == 0


def test_resolve_rejects_bad_input_by_field(client):
    bad = client.post(
        "/api/v1/presets/resolve",
        json={"config": {"env_id": "ALE/Pong-v5", "lr": -1, "preset": "fastest"}},
    )
    assert bad.status_code == 422
    fields = {f["field"] for f in bad.json()["error"]["fields"]}
    assert fields == {"config.preset", "config.lr"}
    bad = client.post(
        "/api/v1/presets/resolve", json={"config": {"env_id": "ALE/Pong-v5", "lr": -1}}
    )
    assert bad.status_code == 422
    assert [f["field"] for f in bad.json()["error"]["fields"]] == ["config.lr"]
    bad = client.post("/api/v1/presets/resolve", json={"config": {}, "extra": 1})
    assert bad.status_code == 422
    assert [f["field"] for f in bad.json()["error"]["fields"]] == ["extra"]


def test_create_stores_and_returns_the_resolved_config(client, create_experiment):
    exp = create_experiment(
        "pong", config={"env_id": "ALE/Pong-v5", "stop": {"wall_seconds": 300}, "seed": 2}
    )
    config = exp["config"]
    assert config["preset"] == "atari" and config["clip_rewards"] == 1.0
    assert config["model"]["vf_share_layers"] is True and config["num_envs_per_env_runner"] == 64
    assert config["stop"]["wall_seconds"] == 300 and config["stop"]["env_steps"] == 10_000_000
    assert config["seed"] == 2
    fetched = client.get(f"/api/v1/experiments/{exp['id']}").json()
    assert fetched["config"] == config
    # The stored config resolves to itself: a fork without overrides changes nothing.
    fork = client.post(f"/api/v1/experiments/{exp['id']}/fork", json={}).json()
    assert fork["config"] == config
    # A named preset and "none" are kept as asked.
    plain = create_experiment("plain", config={"env_id": "Pendulum-v1", "preset": "none"})
    assert plain["config"]["preset"] == "none"
    assert plain["config"]["gamma"] == PPOConfig().gamma
