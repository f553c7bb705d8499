"""What `cmx run` prints when it is done, for a person or as --json: no click, no typing.

Both the click command and the start-up path of a cached run (cmx.cli.main) print through
here, so the two cannot drift apart.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing itself costs ~8 ms to import; type checkers read this name as typing's
if TYPE_CHECKING:
    from typing import Any


def json_text(data: Any) -> str:
    """JSON as every --json of cmx prints it."""
    import json

    return json.dumps(data, indent=2, default=str) + "\n"


def done_lines(root: str, seconds: float, steps: dict[str, dict[str, Any]], run_dir: str,
               outputs: dict[str, Any]) -> list[str]:
    """The closing line of a successful run (status counts and where its record is), then its outputs."""
    counts: dict[str, int] = {}
    for step in steps.values():
        counts[step["status"]] = counts.get(step["status"], 0) + 1
    summary = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
    return [f"ok: {root} in {seconds:.2f}s ({summary}); record: {run_dir}/run.json", *output_lines(outputs)]


def output_lines(outputs: dict[str, Any]) -> list[str]:
    """Outputs for a person: a multi-line text as an indented block, a long list or mapping
    shortened (`--json` has every value whole)."""
    lines = []
    for name, value in outputs.items():
        if isinstance(value, str) and "\n" in value:
            lines.append(f"  {name}:")
            lines.extend(f"    {line}" for line in value.splitlines())
        elif isinstance(value, (list, dict)):
            import json

            text = json.dumps(value)
            lines.append(f"  {name} = {text}" if len(text) <= 100 else f"  {name} = {text[:80]}…  (whole: --json)")
        else:
            lines.append(f"  {name} = {value}")
    return lines


def result_json(*, ok: bool, query: str, root: str, run_dir: str, seconds: float, outputs: dict[str, Any],
                steps: dict[str, dict[str, Any]], error: str | None) -> dict[str, Any]:
    """`cmx run --json`'s document."""
    return {"ok": ok, "query": query, "root": root, "run_dir": run_dir, "seconds": round(seconds, 3),
            "outputs": outputs, "steps": steps, "error": error}
