"""The client commands of `rollout`, one module per domain.

Each module has `register(sub, common)`, which adds its subcommands to the parser with a
`handler(args, client) -> exit code` default; app/service_cli.py calls every one of them. All
of them talk to the service through `app.client.RolloutClient`.
"""
