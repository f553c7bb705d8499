"""Plain-text rendering of plans, recipes and tables (no rich: these paths must start fast)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from cmx.api import Secret, public_value, to_json

if TYPE_CHECKING:  # `cmx find` renders a table only: it must not import the model
    from cmx.api import Plan, Recipe, Step


def _label(step: Step) -> str:
    return " ".join([step.name, *(f"_{v}" for v in step.variations)])


_SHOWN = {"build": "to build", "run": "runs", "cached": "cached", "idle": "not needed (below a cached step)"}


def plan_tree(plan: Plan, cached: dict[str, bool], show_inputs: bool = False,
              notes: Mapping[str, Sequence[str]] | None = None) -> list[str]:
    """The DAG as a tree from the root; a step reached a second time is shown once, then referenced. `notes`: lines
    a step's plan check said (what it will do that its inputs do not say), shown under it."""
    lines: list[str] = []
    seen: set[str] = set()
    statuses = plan.statuses(lambda s: cached.get(s.id, False))

    def walk(step_id: str, prefix: str, last: bool, top: bool) -> None:
        step = plan.steps[step_id]
        branch = "" if top else ("└─ " if last else "├─ ")
        state = _SHOWN[statuses[step_id]]
        again = step_id in seen
        text = f"{prefix}{branch}{_label(step)}  {step.key[:10]}  {state}"
        if again:
            lines.append(text + "  (see above)")
            return
        seen.add(step_id)
        lines.append(text)
        child_prefix = prefix + ("" if top else ("   " if last else "│  "))
        if statuses[step_id] == "build":
            for url in step.fetches():
                lines.append(f"{child_prefix}   fetches {url}")
        lines.extend(f"{child_prefix}   {note}" for note in (notes or {}).get(step_id, ()))
        if show_inputs:
            for name, value in step.inputs.items():
                shown = "********" if isinstance(value, Secret) else public_value(to_json(value))  # user:***@
                lines.append(f"{child_prefix}   {name} = {shown!r}  ({step.origins.get(name)})")
        for i, edge in enumerate(step.deps):
            walk(edge.step, child_prefix, i == len(step.deps) - 1, False)

    walk(plan.root, "", True, True)
    return lines


def plan_summary(plan: Plan, cached: dict[str, bool]) -> str:
    counts = {"cached": 0, "build": 0, "run": 0, "idle": 0}
    for status in plan.statuses(lambda s: cached.get(s.id, False)).values():
        counts[status] += 1
    text = f"{len(plan)} step(s): {counts['cached']} cached, {counts['build']} to build, {counts['run']} to run"
    return text + (f", {counts['idle']} not needed (below a cached step)" if counts["idle"] else "")


def found_report(found: Sequence[Any], as_json: bool) -> tuple[str, str, int]:
    """What `cmx find` prints: (stdout, stderr, exit code). Shared by the click command and
    the fast path in cmx.cli.main."""
    if as_json:
        import json

        items = [{"name": i.name, "tags": list(i.tags), "summary": i.summary, "source": i.source,
                  "path": str(i.folder)} for i in found]
        return json.dumps(items, indent=2) + "\n", "", 0
    if not found:
        return "", "no recipe matches\n", 1
    lines = table(("NAME", "TAGS", "SUMMARY"), ((i.name, " ".join(i.tags), i.summary) for i in found))
    return "\n".join(lines) + "\n", "", 0


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> list[str]:
    rows = [[str(c) for c in row] for row in rows]
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(headers)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return [fmt.format(*headers).rstrip(), *(fmt.format(*r).rstrip() for r in rows)]


def recipe_description(recipe: Recipe) -> list[str]:
    out = [f"{recipe.name}: {recipe.summary}" if recipe.summary else recipe.name,
           f"  tags: {' '.join(recipe.tags) or '-'}",
           f"  from: {recipe.path} (source {recipe.source})",
           f"  cache: {_cache_text(recipe)}"]
    if recipe.extends:  # what it inherits is shown merged below; this says from where
        out.insert(3, f"  extends: {recipe.extends} ({', '.join(str(b) for b in recipe.bases)})")
    if recipe.abstract:
        out.insert(1, "  abstract: a base other recipes extend; no query selects it")
    if recipe.context:
        out.append(f"  reads context: {', '.join(recipe.context)}")
    if recipe.inputs:
        out.append("  inputs:")
        for spec in recipe.inputs.values():
            if spec.required:
                default = "required"
            elif spec.default is None:
                default = "optional"
            else:
                default = f"default {to_json(spec.default)!r}"
            extra = f", env ${spec.env}" if spec.env else ""
            kind = f"choice of {'|'.join(spec.choices)}" if spec.type == "choice" else spec.type
            out.append(f"    {spec.name} ({kind}, {default}{extra})" + (f": {spec.help}" if spec.help else ""))
    if recipe.groups or recipe.flags:
        out.append("  variations:")
        for group, options in recipe.groups.items():
            out.append(f"    {group}:")
            for v in options:
                out.append(f"      _{v.name}{' (default)' if v.default else ''}"
                           + (f": {v.summary}" if v.summary else ""))
                out.extend(_variation_effects(v))
        if recipe.flags:
            out.append("    flags:")
            for v in recipe.flags.values():
                out.append(f"      _{v.name}" + (f": {v.summary}" if v.summary else ""))
                out.extend(_variation_effects(v))
    if recipe.deps:
        out.append("  deps:")
        for dep in recipe.deps:
            out.append(f"    {_dep_text(dep)}")
    if recipe.outputs:
        out.append("  outputs:")
        for o in recipe.outputs.values():
            out.append(f"    {o.name} ({o.type})" + (f": {o.help}" if o.help else ""))
    return out


def _variation_effects(v: Any) -> list[str]:
    """What choosing a variation changes, one indented line per kind of change."""
    lines = []
    if v.inputs:
        lines.append("          sets inputs " + ", ".join(f"{k}={to_json(val)!r}" for k, val in v.inputs))
    if v.context:
        lines.append("          sets context " + ", ".join(f"{k}={val!r}" for k, val in v.context))
    for dep in v.deps:
        lines.append(f"          adds dep {_dep_text(dep)}")
    if v.docker:
        lines.append("          adds docker " + ", ".join(
            part for part in (f"apt {' '.join(v.docker.apt)}" if v.docker.apt else "",
                              f"pip {' '.join(v.docker.pip)}" if v.docker.pip else "",
                              f"env {' '.join(k for k, _ in v.docker.env)}" if v.docker.env else "") if part))
    return lines


def _dep_text(dep: Any) -> str:
    text = str(dep.query)
    if dep.as_:
        text += f" as {dep.as_}"
    if dep.with_:
        # `!r` quotes every value, a literal one too (`value` and the other kinds print alike)
        text += " with " + ", ".join(f"{k}={w.value!r}" if w.kind != "ref"
                                      else f"{k}={{{{ {w.namespace}.{w.value} }}}}" for k, w in dep.with_)
    if dep.when:
        text += f" when {dep.when.source}"
    return text


def _cache_text(recipe: Recipe) -> str:
    if not recipe.cache.enabled:
        return "no (runs every time)"
    text = f"yes, keyed on {', '.join(recipe.cache.key)}" if recipe.cache.key else \
        "yes, keyed on recipe files, variations, inputs, context and deps"
    fp = recipe.cache.fingerprint
    if fp is not None:
        parts = [*(f"file {f}" for f in fp.files), *(f"program {p}" for p in fp.programs),
                 *(f"${e}" for e in fp.env), *(["the machine"] if fp.machine else [])]
        text += f"; fingerprint: {', '.join(parts)}"
    return text


def human_size(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"
