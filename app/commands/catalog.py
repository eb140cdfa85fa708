"""`rollout presets` (the preset tables, or what a config resolves to)."""

from __future__ import annotations

import argparse
import json

from app.client import RolloutClient
from app.commands.common import adder
from trainer.inputs import read_config


def cmd_presets(args: argparse.Namespace, client: RolloutClient) -> int:
    if args.resolve:
        resolved = client.resolve_config(read_config(args.resolve))
        print(json.dumps(resolved.config, indent=2))
        settings = f" + {resolved.env_settings}" if resolved.env_settings else ""
        print(f"preset: {resolved.preset}{settings}")
        for source in resolved.sources:
            print(f"  source: {source}")
        return 0
    for preset in client.presets().items:
        members = ", ".join(sorted(preset.members)) or "-"
        print(f"{preset.name:<28} {preset.title}")
        print(f"{'':<28} envs: {members}; source: {preset.source}")
    return 0


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    parser = adder(sub, common)("presets", cmd_presets, "the presets of env families")
    parser.add_argument("--resolve", metavar="CONFIG", help="print what this config resolves to")
