"""Free-form JSON in request bodies (configs, fork overrides), bounded in depth.

Python's JSON parser reads a body nested hundreds of levels deep, but everything recursive after
it (deepcopy in config resolution, pydantic's error rendering, json.dumps for the database) then
hits the interpreter's recursion limit: a 500. An iterative walk refuses such input first, as a
422 naming the field. (Deeper still, e.g. 100k nested arrays, the parser itself gives up: a 400.)
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator

# A PPOConfig is 3 levels deep (config.model.hidden_sizes); env_config may nest 16 more
# (trainer.config.MAX_ENV_CONFIG_DEPTH). Anything deeper is no config.
MAX_JSON_DEPTH = 32


def check_depth(value: Any, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """`value` unchanged, or ValueError if lists / objects nest deeper than `max_depth`."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth >= max_depth:
                raise ValueError(f"nested deeper than {max_depth} levels")
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return value


JsonObject = Annotated[dict[str, Any], AfterValidator(check_depth)]
