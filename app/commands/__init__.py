"""The commands of `rollout` that the service side owns: `serve` and the client commands.

`serve.py` starts the service itself: its `register(sub)` adds a `handler(args) -> exit code`.
The client commands, one module per domain, each have `register(sub, common)`, which adds
their subcommands to the parser with a `handler(args, client) -> exit code` default, and talk
to the service through `app.client.RolloutClient`. app/cli.py registers every one of them.
"""
