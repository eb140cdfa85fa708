"""The `rollout` command line.

Training commands (`train`, `evaluate`) run the trainer locally and live in trainer/cli.py;
they are imported lazily so the service commands never load torch or gymnasium.
"""

from __future__ import annotations

import sys

TRAINER_COMMANDS = ("train", "evaluate")


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in TRAINER_COMMANDS:
        from trainer.cli import main as trainer_main

        return trainer_main(args)
    from app.service_cli import main as service_main

    return service_main(args)


if __name__ == "__main__":
    raise SystemExit(main())
