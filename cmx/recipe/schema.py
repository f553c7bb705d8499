"""Validation of a parsed recipe.yaml into a Recipe: every error names the file and line."""

from __future__ import annotations

import os
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

from cmx.errors import RecipeError
from cmx.recipe.expr import Expr, ExprSyntaxError, compile_expr
from cmx.recipe.model import (
    CacheSpec,
    DepSpec,
    DockerSpec,
    Fingerprint,
    InputSpec,
    OutputSpec,
    Recipe,
    Variation,
    WithValue,
)
from cmx.recipe.query import QuerySyntaxError, is_kebab, parse_query
from cmx.recipe.types import INPUT_TYPES, OUTPUT_TYPES, TypeMismatch, coerce
from cmx.recipe.yamlload import LocDict, LocList
from cmx.tools.fs import resolves_inside

TOP_KEYS = ("name", "summary", "tags", "abstract", "extends", "params", "inputs", "variations", "flags", "context",
            "deps", "cache", "outputs", "docker", "files")
INPUT_KEYS = ("type", "default", "help", "env", "choices", "needs", "unless")
VARIATION_KEYS = ("default", "summary", "inputs", "context", "deps", "docker", "remove")
DEP_KEYS = ("tags", "with", "when", "as")
DOCKER_KEYS = ("apt", "pip", "env")
OUTPUT_KEYS = ("type", "help")

_IDENT = re.compile(r"^[a-z_][a-z0-9_]*$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_REF = re.compile(r"^\{\{\s*(inputs|context)\.([a-z_][a-z0-9_]*)\s*\}\}$")


class _Checker:
    """Carries the file path so each check can say where it failed."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def fail(self, line: int, message: str, hint: str | None = None) -> RecipeError:
        return RecipeError(message, where=f"{self.path}:{line}", hint=hint)

    def mapping(self, value: Any, line: int, what: str, allowed: tuple[str, ...] | None = None) -> LocDict:
        if not isinstance(value, LocDict):
            raise self.fail(line, f"{what} must be a mapping, got {_kind(value)}")
        if allowed is not None:
            for key in value:
                if key not in allowed:
                    close = _closest(key, allowed)
                    hint = f"did you mean {close!r}?" if close else f"allowed keys: {', '.join(allowed)}"
                    raise self.fail(value.line_of(key), f"unknown key {key!r} in {what}", hint)
        return value

    def string(self, value: Any, line: int, what: str) -> str:
        if not isinstance(value, str):
            raise self.fail(line, f"{what} must be a string, got {_kind(value)}")
        return value

    def strings(self, value: Any, line: int, what: str) -> tuple[str, ...]:
        if isinstance(value, str):
            return tuple(value.split())
        if not isinstance(value, LocList):
            raise self.fail(line, f"{what} must be a list of strings, got {_kind(value)}")
        for item, item_line in zip(value, value.item_lines, strict=True):  # yamlload adds a line per item
            self.string(item, item_line, f"an item of {what}")
        return tuple(value)

    def ident(self, value: str, line: int, what: str) -> str:
        if not _IDENT.match(value):
            raise self.fail(line, f"{what} {value!r} must be snake_case (a-z, 0-9, _)")
        return value

    def kebab(self, value: str, line: int, what: str) -> str:
        if not is_kebab(value):
            raise self.fail(line, f"{what} {value!r} must be kebab-case (a-z, 0-9, '-')",
                            f"for example {re.sub(r'[^a-z0-9.]+', '-', value.lower()).strip('-') or 'my-name'!r}")
        return value


def extends_of(data: Any, path: Path) -> tuple[str, int] | None:
    """The base a parsed recipe.yaml names with `extends:`, and its line; None when it extends nothing."""
    if not isinstance(data, LocDict) or "extends" not in data:
        return None
    c = _Checker(path)
    at = data.line_of("extends")
    return c.kebab(c.string(data["extends"], at, "extends"), at, "extends"), at


def validate_recipe(data: Any, folder: Path, *, source: str = "", digest: str = "",
                    has_run: bool = False, base: Recipe | None = None) -> Recipe:
    """Turn the loaded YAML of `folder/recipe.yaml` into a Recipe, or raise RecipeError.

    With `base` (the recipe its `extends:` names, already loaded and merged), the result is the base with this
    file's keys merged onto it, by the rules of docs/recipes.md ("Extending a recipe")."""
    path = folder / "recipe.yaml"
    c = _Checker(path)
    top = c.mapping(data, 1, "a recipe", TOP_KEYS)
    if "name" not in top:
        raise c.fail(top.line, "missing required key 'name'")
    name = c.kebab(c.string(top["name"], top.line_of("name"), "name"), top.line_of("name"), "name")
    if name != folder.name:
        raise c.fail(top.line_of("name"), f"name {name!r} differs from its folder {folder.name!r}",
                     "rename the folder or the recipe so that they are equal")
    abstract = top.get("abstract", False)
    if not isinstance(abstract, bool):
        raise c.fail(top.line_of("abstract"), "abstract must be true or false")
    tags = _tags(c, top, abstract)
    summary = c.string(top.get("summary", base.summary if base else ""), top.line_of("summary"), "summary")

    context = c.strings(top.get("context", LocList(1)), top.line_of("context"), "context")
    for key in context:
        c.ident(key, top.line_of("context"), "context key")
    if base is not None:
        context = base.context + tuple(k for k in context if k not in base.context)

    inputs = _inputs(c, top.get("inputs"), top.line_of("inputs"), base)
    names = _Names(inputs, context)
    groups, flags = _variations(c, top, inputs, names, base)
    deps = _deps(c, top.get("deps"), top.line_of("deps"), "deps", names)
    if base is not None:
        deps = _merged_deps(base, deps)
    _check_dep_names(c, deps, groups, flags)
    _check_needs(c, inputs, groups, flags)
    if base is not None:
        _check_inherited_values(c, top, inputs, groups, flags, base)
    outputs = _outputs(c, top.get("outputs"), top.line_of("outputs"), base)
    has_run = has_run or (base is not None and base.has_run)
    if outputs and not has_run:
        raise c.fail(top.line_of("outputs"), "outputs are declared but the recipe has no run.py to produce them",
                     "add run.py with `def run(ctx) -> dict`, or remove outputs")
    files = c.strings(top.get("files", LocList(1)), top.line_of("files"), "files")
    for rel in files:
        if rel.startswith("/") or ".." in Path(rel).parts or not (folder / rel).is_file() \
                or not resolves_inside(folder / rel, folder):  # a symlink out of the folder
            raise c.fail(top.line_of("files"), f"listed file {rel!r} is not a file inside the recipe folder")
    if "cache" in top or base is None:
        cache = _cache(c, top.get("cache", False), top.line_of("cache"), inputs, context, deps, groups, flags)
    else:
        cache = base.cache  # its key fields name inputs and deps the merge kept: a base's input is never removed
    docker = _docker(c, top.get("docker"), top.line_of("docker"), "docker")
    params = _params(c, top.get("params"), top.line_of("params"))
    if base is not None:
        docker = _merged_docker(base.docker, docker)
        params = {**base.params, **params}
    return Recipe(name=name, summary=summary, tags=tags, path=folder, inputs=inputs, groups=groups,
                  flags=flags, context=context, deps=deps, cache=cache, outputs=outputs, docker=docker,
                  files=files, has_run=has_run, digest=digest, source=source, abstract=abstract,
                  extends=base.name if base is not None else None,
                  bases=(base.path, *base.bases) if base is not None else (),
                  run_from=base.run_from or base.path if base is not None and base.has_run and not
                  (folder / "run.py").is_file() else None,
                  params=params)


def _tags(c: _Checker, top: LocDict, abstract: bool) -> tuple[str, ...]:
    """A recipe's own tags (never inherited: the words that find a recipe are read in its own file)."""
    if abstract:
        if "tags" in top:
            raise c.fail(top.line_of("tags"), "an abstract recipe carries no tags: no query ever selects it",
                         "remove `tags:`, or `abstract: true` if this recipe is meant to run")
        return ()
    if "tags" not in top:
        raise c.fail(top.line, "missing required key 'tags'")
    tags = c.strings(top["tags"], top.line_of("tags"), "tags")
    if not tags:
        raise c.fail(top.line_of("tags"), "tags must not be empty")
    for tag in tags:
        c.kebab(tag, top.line_of("tags"), "tag")
    return tags


def _params(c: _Checker, raw: Any, line: int) -> dict[str, Any]:
    """`params`: fixed values of this recipe for its run.py (ctx.params), never given from outside."""
    if raw is None:
        return {}
    block = c.mapping(raw, line, "params")
    for key, value in block.items():
        c.ident(key, block.line_of(key), "param name")
        if not isinstance(value, (str, int, float, bool)):
            raise c.fail(block.line_of(key), f"param {key!r} must be a scalar, got {_kind(value)}")
    return dict(block)


class _Names:
    """The names a `when:` or a template of this recipe may read."""

    def __init__(self, inputs: dict[str, InputSpec], context: tuple[str, ...]) -> None:
        self.inputs = inputs
        self.context = frozenset(context)
        self.groups: frozenset[str] = frozenset()

    def check(self, c: _Checker, expr: Expr, line: int) -> None:
        for namespace, name in expr.names:
            if namespace == "inputs" and name not in self.inputs:
                raise c.fail(line, f"`when: {expr.source}` reads inputs.{name}, which is not a declared input")
            if namespace == "context" and name not in self.context:
                raise c.fail(line, f"`when: {expr.source}` reads context.{name}, which the recipe does not list",
                             f"add {name!r} to the recipe's `context:` list")
            if namespace == "variations" and name and name not in self.groups:
                raise c.fail(line, f"`when: {expr.source}` reads variations.{name}, which is not a variation group")
            if namespace == "" and name not in self.inputs and name not in self.context and name not in self.groups:
                known = sorted({*self.inputs, *self.context, *self.groups})
                raise c.fail(line, f"`when: {expr.source}` reads {name!r}, which is not an input, "
                                   "a listed context key or a variation group",
                             f"known names: {', '.join(known) or 'none'}" + (
                                 f" (did you mean {_closest(name, known)!r}?)" if _closest(name, known) else ""))


def _inputs(c: _Checker, raw: Any, line: int, base: Recipe | None = None) -> dict[str, InputSpec]:
    """The inputs this file declares; with a base, merged onto the base's by name, key by key (an input the
    base declares may be given only the keys that change: its help, default or choices)."""
    out: dict[str, InputSpec] = {n: _rebased(s, base.path) for n, s in base.inputs.items()} if base else {}
    if raw is None:
        return out
    block = c.mapping(raw, line, "inputs")
    for name, spec in block.items():
        at = block.line_of(name)
        c.ident(name, at, "input name")
        spec = c.mapping(spec, at, f"input {name!r}", INPUT_KEYS)
        inherited = out.get(name)
        if "type" in spec:
            type_name = c.string(spec["type"], spec.line_of("type"), "type")
        elif inherited is not None:
            type_name = inherited.type
        else:
            raise c.fail(at, f"input {name!r} has no type", f"add `type:` (one of {', '.join(INPUT_TYPES)})")
        if inherited is not None and base is not None and type_name != inherited.type:
            raise c.fail(spec.line_of("type"), f"input {name!r} is {inherited.type} in the base "
                                               f"({base.where(inherited.line, inherited.origin or base.path)}), "
                                               f"{type_name} here", "an input keeps its base's type: its variations "
                                               "and the base's run.py read it as that; give it another name")
        if type_name not in INPUT_TYPES:
            raise c.fail(spec.line_of("type"), f"input {name!r} has unknown type {type_name!r}",
                         f"one of {', '.join(INPUT_TYPES)}")
        choices: tuple[str, ...] = inherited.choices if inherited is not None else ()
        if type_name == "choice":
            if "choices" in spec:
                choices = tuple(str(x) for x in c.strings(spec["choices"], spec.line_of("choices"), "choices"))
            elif inherited is None:
                raise c.fail(at, f"input {name!r} is a choice but lists no `choices`")
        elif "choices" in spec:
            raise c.fail(spec.line_of("choices"), f"`choices` only applies to type choice, not {type_name}")
        env = spec.get("env", inherited.env if inherited is not None else None)
        if env is not None and not (isinstance(env, str) and _ENV_NAME.match(env)):
            raise c.fail(spec.line_of("env"), f"env of input {name!r} must be an environment variable name")
        if "default" in spec or inherited is None:
            required = "default" not in spec
            default = spec.get("default")
            default_at = spec.line_of("default")
        else:
            required, default, default_at = inherited.required, inherited.default, at
        if default is not None:
            if type_name == "secret":
                raise c.fail(default_at, f"secret input {name!r} cannot have a default",
                             "secrets come from the command line or `env:`; never write them in a recipe")
            default = _typed(c, default, type_name, choices, default_at, f"default of {name!r}")
        help_ = spec.get("help", inherited.help if inherited is not None else "")
        needs = spec.get("needs", inherited.needs if inherited is not None else None)
        if needs is not None:
            needs = c.kebab(c.string(needs, spec.line_of("needs"), "needs"), spec.line_of("needs"), "needs")
        unless = spec.get("unless", inherited.unless if inherited is not None else None)
        if unless is not None:
            unless = c.string(unless, spec.line_of("unless"), "unless")
        out[name] = InputSpec(name=name, type=type_name, default=default, required=required,
                              help=c.string(help_, spec.line_of("help"), "help"),
                              env=env, choices=choices, line=at, needs=needs, unless=unless)
    return out


def _rebased(spec: InputSpec, base_folder: Path) -> InputSpec:
    """A base's input as its child holds it: a relative path default is relative to the base's folder, where it
    was written (the resolver makes one relative to the recipe's own folder)."""
    origin = spec.origin or base_folder
    if spec.type == "path" and isinstance(spec.default, str) and not os.path.isabs(os.path.expanduser(spec.default)):
        return replace(spec, default=str(origin / spec.default), origin=origin)
    return replace(spec, origin=origin)


def _typed(c: _Checker, value: Any, type_name: str, choices: tuple[str, ...], line: int, what: str) -> Any:
    if type_name == "path" and isinstance(value, str):
        return value  # made absolute at resolve time: relative to the recipe folder
    try:
        return coerce(value, type_name, choices)
    except TypeMismatch as exc:
        raise c.fail(line, f"{what}: {exc}") from None


def _variations(c: _Checker, top: LocDict, inputs: dict[str, InputSpec], names: _Names, base: Recipe | None = None,
                ) -> tuple[dict[str, tuple[Variation, ...]], dict[str, Variation]]:
    seen: dict[str, int] = {}
    pending_deps: dict[str, tuple[Any, int]] = {}
    given: dict[str, frozenset[str]] = {}  # variation name -> the keys this file gives it

    def one(name: str, spec: Any, at: int, group: str | None) -> Variation:
        c.kebab(name, at, "variation name")
        if name in seen:
            raise c.fail(at, f"variation {name!r} is defined twice (first at line {seen[name]})",
                         "variation names must be unique across groups and flags")
        seen[name] = at
        if spec is None:
            spec = LocDict(at)
        spec = c.mapping(spec, at, f"variation {name!r}", VARIATION_KEYS)
        given[name] = frozenset(spec)
        default = spec.get("default", False)
        if not isinstance(default, bool):
            raise c.fail(spec.line_of("default"), f"default of variation {name!r} must be true or false")
        if default and group is None:
            raise c.fail(spec.line_of("default"), f"flag {name!r} cannot be a default", "flags are off unless chosen")
        if "deps" in spec:
            pending_deps[name] = (spec["deps"], spec.line_of("deps"))
        set_inputs = []
        raw_inputs = spec.get("inputs")
        if raw_inputs is not None:
            block = c.mapping(raw_inputs, spec.line_of("inputs"), f"inputs of variation {name!r}")
            for key, value in block.items():
                if key not in inputs:
                    raise c.fail(block.line_of(key), f"variation {name!r} sets unknown input {key!r}",
                                 f"declared inputs: {', '.join(inputs) or 'none'}")
                spec_in = inputs[key]
                if spec_in.type == "secret":
                    raise c.fail(block.line_of(key), f"variation {name!r} cannot set secret input {key!r}")
                set_inputs.append((key, _typed(c, value, spec_in.type, spec_in.choices, block.line_of(key),
                                               f"input {key!r} of variation {name!r}")))
        set_context = []
        raw_ctx = spec.get("context")
        if raw_ctx is not None:
            block = c.mapping(raw_ctx, spec.line_of("context"), f"context of variation {name!r}")
            for key, value in block.items():
                c.ident(key, block.line_of(key), "context key")
                if not isinstance(value, (str, int, float, bool)):
                    raise c.fail(block.line_of(key), f"context value {key!r} must be a scalar, got {_kind(value)}")
                set_context.append((key, value))
        return Variation(
            name=name, group=group, default=default,
            summary=c.string(spec.get("summary", ""), spec.line_of("summary"), "summary"),
            inputs=tuple(set_inputs), context=tuple(set_context),
            deps=(), docker=_docker(c, spec.get("docker"), spec.line_of("docker"), f"docker of variation {name!r}"),
            line=at,
        )

    def some(block: LocDict, group: str | None) -> tuple[list[Variation], dict[str, int]]:
        """The variations a block defines, and those it removes (by name, with their lines)."""
        made, removed = [], {}
        for n, spec in block.items():
            if isinstance(spec, LocDict) and "remove" in spec:
                removed[n] = _removal(c, spec, n, block.line_of(n), base)
            else:
                made.append(one(n, spec, block.line_of(n), group))
        return made, removed

    own_groups: dict[str, tuple[list[Variation], dict[str, int], int]] = {}
    raw = top.get("variations")
    if raw is not None:
        block = c.mapping(raw, top.line_of("variations"), "variations")
        for group, options in block.items():
            at = block.line_of(group)
            c.ident(group, at, "variation group")
            options = c.mapping(options, at, f"variation group {group!r} (a mapping of variation names)")
            if not options:
                raise c.fail(at, f"variation group {group!r} is empty")
            made, removed = some(options, group)
            if sum(v.default for v in made) > 1:
                raise c.fail(at, f"variation group {group!r} has more than one default")
            own_groups[group] = (made, removed, at)
    own_flags: tuple[list[Variation], dict[str, int]] = ([], {})
    raw = top.get("flags")
    if raw is not None:
        own_flags = some(c.mapping(raw, top.line_of("flags"), "flags"), None)
    if base is None:
        groups = {g: tuple(made) for g, (made, _, _) in own_groups.items()}
        flags = {v.name: v for v in own_flags[0]}
    else:
        groups, flags = _merged_variations(c, base, own_groups, own_flags, given)
    # deps of variations are parsed once all group names are known: a `when` may read them
    names.groups = frozenset(groups)
    for vname, (raw_deps, at) in pending_deps.items():
        deps = _deps(c, raw_deps, at, f"deps of variation {vname!r}", names)
        _replace_deps(groups, flags, vname, deps)
    return groups, flags


def _removal(c: _Checker, spec: LocDict, name: str, at: int, base: Recipe | None) -> int:
    """`name: {remove: true}`: the line of a valid removal of a base's variation."""
    if spec["remove"] is not True or len(spec) != 1:
        raise c.fail(spec.line_of("remove"), f"variation {name!r}: `remove` must be `true` and alone",
                     f"write `{name}: {{remove: true}}` to drop the base's variation, or give its keys to change it")
    if base is None:
        raise c.fail(spec.line_of("remove"), f"variation {name!r} removes a base's variation, but this recipe "
                                             "extends nothing", "add `extends: BASE`, or delete the variation")
    return at


def _merged_variations(c: _Checker, base: Recipe, own_groups: dict[str, tuple[list[Variation], dict[str, int], int]],
                       own_flags: tuple[list[Variation], dict[str, int]], given: dict[str, frozenset[str]],
                       ) -> tuple[dict[str, tuple[Variation, ...]], dict[str, Variation]]:
    """The base's groups and flags with this file's merged in (docs/recipes.md): a group by name, then a choice
    by name, key by key; `remove: true` drops a base's choice; what a child adds comes before what it inherits."""
    home = {v.name: g for g, opts in base.groups.items() for v in opts} | {n: None for n in base.flags}

    def merged(inherited: tuple[Variation, ...], made: list[Variation], removed: dict[str, int],
               where: str) -> tuple[Variation, ...]:
        names = {v.name for v in inherited}
        for name, at in removed.items():
            if name not in names:
                raise c.fail(at, f"variation {name!r} is not one of the base's {where}: there is nothing to remove",
                             f"the base's: {', '.join(sorted(names)) or 'none'}")
        for v in made:  # a name is unique across groups and flags: a base's elsewhere is a clash
            if v.name in home and v.name not in names:
                other = f"group {home[v.name]!r}" if home[v.name] else "flags"
                raise c.fail(v.line, f"variation {v.name!r} is in the base's {other}, not its {where}",
                             "a variation keeps its group: give this one another name")
        changed = {v.name: v for v in made if v.name in names}
        defaults = {v.name for v in made if v.default}
        out = [v for v in made if v.name not in names]
        for v in inherited:
            if v.name in removed:
                continue
            v = _rebased_variation(v, base.path)
            if v.name in changed:
                v = _merged_choice(v, changed[v.name], given[v.name])
            if defaults and v.name not in defaults:
                v = replace(v, default=False)  # a child's default replaces the base's
            out.append(v)
        return tuple(out)

    groups: dict[str, tuple[Variation, ...]] = {}
    for group, (made, removed, _at) in own_groups.items():
        if group not in base.groups:
            groups[group] = merged((), made, removed, f"group {group!r}")
    for group, options in base.groups.items():
        if group in own_groups:
            made, removed, at = own_groups[group]
            groups[group] = merged(options, made, removed, f"group {group!r}")
            if not groups[group]:
                raise c.fail(at, f"variation group {group!r} is left with no choice",
                             "keep at least one of the base's choices, or add one")
        else:
            groups[group] = tuple(_rebased_variation(v, base.path) for v in options)
    flags = merged(tuple(base.flags.values()), *own_flags, "flags")
    return groups, {v.name: v for v in flags}


_CHOICE_FIELDS = {"default": "default", "summary": "summary", "inputs": "inputs", "context": "context",
                  "docker": "docker"}  # `deps` are set afterwards, once every group is known (_replace_deps)


def _merged_choice(inherited: Variation, own: Variation, keys: frozenset[str]) -> Variation:
    """A base's variation with the keys this file gives it replaced whole (`inputs: {...}` replaces them all)."""
    return replace(inherited, line=own.line, **{f: getattr(own, f) for k, f in _CHOICE_FIELDS.items() if k in keys})


def _rebased_variation(v: Variation, base_folder: Path) -> Variation:
    """A base's variation as a child holds it: its deps remember the base's file, for errors and `with` paths."""
    return replace(v, deps=tuple(_rebased_dep(d, base_folder) for d in v.deps)) if v.deps else v


def _rebased_dep(dep: DepSpec, base_folder: Path) -> DepSpec:
    return dep if dep.origin is not None else replace(dep, origin=base_folder)


def _merged_deps(base: Recipe, own: tuple[DepSpec, ...]) -> tuple[DepSpec, ...]:
    """The base's deps, then this file's; one with the `as` name of a base's dep takes its place."""
    out = [_rebased_dep(d, base.path) for d in base.deps]
    for dep in own:
        at = next((i for i, d in enumerate(out) if dep.as_ is not None and d.as_ == dep.as_), None)
        if at is None:
            out.append(dep)
        else:
            out[at] = dep
    return tuple(out)


def _merged_docker(base: DockerSpec, own: DockerSpec) -> DockerSpec:
    """apt and pip packages added to the base's, env by name."""
    env = dict(base.env) | dict(own.env)
    return DockerSpec(apt=tuple(dict.fromkeys((*base.apt, *own.apt))), pip=tuple(dict.fromkeys((*base.pip, *own.pip))),
                      env=tuple(sorted(env.items())))


def _check_inherited_values(c: _Checker, top: LocDict, inputs: dict[str, InputSpec],
                            groups: dict[str, tuple[Variation, ...]], flags: dict[str, Variation],
                            base: Recipe) -> None:
    """A child that narrows an input's choices must not leave a variation setting a value no longer allowed."""
    for v in [*(v for opts in groups.values() for v in opts), *flags.values()]:
        for key, value in v.inputs:
            spec = inputs[key]
            if spec.type == "choice" and str(value) not in spec.choices:
                raise c.fail(spec.line, f"input {key!r} allows {', '.join(spec.choices)} here, but variation "
                                        f"{v.name!r} sets it to {value!r}",
                             f"keep {value!r} among the choices, or change what _{v.name} sets")


def _replace_deps(groups: dict[str, tuple[Variation, ...]], flags: dict[str, Variation], name: str,
                  deps: tuple[DepSpec, ...]) -> None:
    if name in flags:
        flags[name] = replace(flags[name], deps=deps)
        return
    for group, options in groups.items():
        groups[group] = tuple(replace(v, deps=deps) if v.name == name else v for v in options)


def _check_needs(c: _Checker, inputs: dict[str, InputSpec], groups: dict[str, tuple[Variation, ...]],
                 flags: dict[str, Variation]) -> None:
    """An input's `needs` names one of the recipe's variations or flags."""
    names = [v.name for options in groups.values() for v in options] + list(flags)
    for spec in inputs.values():
        if spec.needs is not None and spec.needs not in names:
            raise c.fail(spec.line, f"input {spec.name!r} needs _{spec.needs}, which is not a variation or flag of "
                                    "this recipe", f"one of: {', '.join('_' + n for n in names) or 'none'}")
        if spec.unless is not None and spec.unless not in inputs:
            raise c.fail(spec.line, f"input {spec.name!r} is unused unless {spec.unless!r}, which is not an input of "
                                    "this recipe", f"one of: {', '.join(inputs)}")


def _check_dep_names(c: _Checker, deps: tuple[DepSpec, ...], groups: dict[str, tuple[Variation, ...]],
                     flags: dict[str, Variation]) -> None:
    """An `as` name may appear once among deps that can be active together: the recipe's own,
    and one per group (variations of one group exclude each other) or flag."""
    owner: dict[str, tuple[str, DepSpec]] = {}
    units = [("the recipe", deps)]
    units += [(f"group {g!r}", tuple(d for v in opts for d in v.deps)) for g, opts in groups.items()]
    units += [(f"flag _{n}", v.deps) for n, v in flags.items()]
    for unit, unit_deps in units:
        for dep in unit_deps:
            if dep.as_ is None:
                continue
            first = owner.get(dep.as_)
            if first is not None and first[0] != unit:
                # said at this file's dep when one of the two is a base's (whose file is valid on its own)
                blamed, other = (first[1], dep) if dep.origin is not None and first[1].origin is None \
                    else (dep, first[1])
                raise RecipeError(f"dep name {dep.as_!r} is also used by {first[0] if blamed is dep else unit} "
                                  f"({_where(c, other)}); both can be active at once", where=_where(c, blamed),
                                  hint="give one of them another `as:` name")
            owner.setdefault(dep.as_, (unit, dep))


def _where(c: _Checker, dep: DepSpec) -> str:
    return f"{(dep.origin / 'recipe.yaml') if dep.origin is not None else c.path}:{dep.line}"


def _deps(c: _Checker, raw: Any, line: int, what: str, names: _Names) -> tuple[DepSpec, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, LocList):
        raise c.fail(line, f"{what} must be a list of mappings, got {_kind(raw)}")
    out: list[DepSpec] = []
    seen_as: dict[str, int] = {}
    for item, at in zip(raw, raw.item_lines, strict=True):
        spec = c.mapping(item, at, f"a dep in {what}", DEP_KEYS)
        if "tags" not in spec:
            raise c.fail(at, "a dep needs `tags`", "for example: tags: get python-package")
        words = c.strings(spec["tags"], spec.line_of("tags"), "tags")
        try:
            query = parse_query(list(words))
        except QuerySyntaxError as exc:
            raise c.fail(spec.line_of("tags"), f"bad dep query: {exc}") from None
        when = None
        if "when" in spec:
            text = c.string(spec["when"], spec.line_of("when"), "when") if not isinstance(spec["when"], bool) else None
            if text is None:
                raise c.fail(spec.line_of("when"), "`when` must be an expression string, like device == \"rocm\"")
            try:
                when = compile_expr(text)
            except ExprSyntaxError as exc:
                raise c.fail(spec.line_of("when"), f"bad `when` expression {text!r}: {exc}",
                             "allowed: comparisons, and/or/not, in, literals, input/context/variation names") from None
            names.check(c, when, spec.line_of("when"))
        as_ = None
        if "as" in spec:
            as_ = c.ident(c.string(spec["as"], spec.line_of("as"), "as"), spec.line_of("as"), "`as` name")
            if as_ in seen_as:
                raise c.fail(spec.line_of("as"), f"two deps are named {as_!r} (first at line {seen_as[as_]})")
            seen_as[as_] = spec.line_of("as")
        with_: list[tuple[str, WithValue]] = []
        if "with" in spec:
            block = c.mapping(spec["with"], spec.line_of("with"), "with")
            for key, value in block.items():
                c.ident(key, block.line_of(key), "input name")
                with_.append((key, _with_value(c, value, block.line_of(key), names)))
        out.append(DepSpec(query=query, with_=tuple(with_), when=when, as_=as_, line=at))
    return tuple(out)


def _with_value(c: _Checker, value: Any, line: int, names: _Names) -> WithValue:
    if isinstance(value, str) and ("{{" in value or "{%" in value):
        ref = _REF.match(value)
        if ref:
            namespace, name = ref.groups()
            known = names.inputs if namespace == "inputs" else names.context
            if name not in known:
                raise c.fail(line, f"template reads {namespace}.{name}, which the recipe does not declare")
            return WithValue("ref", name, namespace)  # typed pass-through; a Secret stays a Secret
        return WithValue("template", value)
    if isinstance(value, (LocDict, LocList)):
        raise c.fail(line, "a `with` value must be a scalar or a template string")
    return WithValue("value", value)


def _outputs(c: _Checker, raw: Any, line: int, base: Recipe | None = None) -> dict[str, OutputSpec]:
    """The outputs this file declares; with a base, merged onto the base's by name (help may change, type not)."""
    out = dict(base.outputs) if base is not None else {}
    if raw is None:
        return out
    block = c.mapping(raw, line, "outputs")
    for name, spec in block.items():
        at = block.line_of(name)
        c.ident(name, at, "output name")
        spec = c.mapping(spec, at, f"output {name!r}", OUTPUT_KEYS)
        inherited = out.get(name)
        type_name = c.string(spec.get("type"), spec.line_of("type"), f"type of output {name!r}") \
            if "type" in spec else inherited.type if inherited is not None else None
        if type_name not in OUTPUT_TYPES:
            raise c.fail(spec.line_of("type"), f"output {name!r} needs a type, one of {', '.join(OUTPUT_TYPES)}")
        if inherited is not None and type_name != inherited.type:
            raise c.fail(spec.line_of("type"), f"output {name!r} is {inherited.type} in the base, {type_name} here",
                         "an output keeps its base's type: its run.py returns that; give it another name")
        help_ = spec.get("help", inherited.help if inherited is not None else "")
        out[name] = OutputSpec(name, type_name, c.string(help_, spec.line_of("help"), "help"))
    return out


def _cache(c: _Checker, raw: Any, line: int, inputs: dict[str, InputSpec], context: tuple[str, ...],
           deps: tuple[DepSpec, ...], groups: dict[str, tuple[Variation, ...]],
           flags: dict[str, Variation]) -> CacheSpec:
    if isinstance(raw, bool):
        return CacheSpec(enabled=raw)
    block = c.mapping(raw, line, "cache (true, false or a mapping of key / fingerprint)", ("key", "fingerprint"))
    if not block:
        raise c.fail(line, "cache mapping needs `key` or `fingerprint`",
                     "for example: cache: {key: [inputs.url, inputs.sha256]}")
    fingerprint = (_fingerprint(c, block["fingerprint"], block.line_of("fingerprint")) if "fingerprint" in block
                   else None)
    if "key" not in block:
        return CacheSpec(enabled=True, fingerprint=fingerprint)
    fields = c.strings(block["key"], block.line_of("key"), "cache key")
    dep_names = {d.as_ for d in deps if d.as_} | {
        d.as_ for opts in groups.values() for v in opts for d in v.deps if d.as_} | {
        d.as_ for v in flags.values() for d in v.deps if d.as_}
    for f in fields:
        ns, _, name = f.partition(".")
        ok = (ns == "inputs" and name in inputs and inputs[name].type != "secret") or \
             (ns == "context" and name in context) or (f == "variations") or (ns == "deps" and name in dep_names)
        if not ok:
            raise c.fail(block.line_of("key"), f"cache key field {f!r} is not a declared input, listed context key, "
                                               "`variations`, or a dep's `as` name",
                         "use inputs.NAME, context.NAME, variations or deps.NAME (secrets never enter keys)")
    return CacheSpec(enabled=True, key=fields, fingerprint=fingerprint)


def _fingerprint(c: _Checker, raw: Any, line: int) -> Fingerprint:
    block = c.mapping(raw, line, "cache fingerprint", ("files", "programs", "env", "machine"))
    files = c.strings(block.get("files", LocList(1)), block.line_of("files"), "fingerprint files")
    for f in files:
        if not f.startswith("/"):
            raise c.fail(block.line_of("files"), f"fingerprint file {f!r} must be an absolute path")
    programs = c.strings(block.get("programs", LocList(1)), block.line_of("programs"), "fingerprint programs")
    for p in programs:
        if "/" in p:
            raise c.fail(block.line_of("programs"), f"fingerprint program {p!r} must be a name looked up on PATH")
    env = c.strings(block.get("env", LocList(1)), block.line_of("env"), "fingerprint env")
    for name in env:
        if not _ENV_NAME.match(name):
            raise c.fail(block.line_of("env"), f"fingerprint env {name!r} is not a variable name")
    machine = block.get("machine", False)
    if not isinstance(machine, bool):
        raise c.fail(block.line_of("machine"), "fingerprint `machine` must be true or false")
    return Fingerprint(files=files, programs=programs, env=env, machine=machine)


def _docker(c: _Checker, raw: Any, line: int, what: str) -> DockerSpec:
    if raw is None:
        return DockerSpec()
    block = c.mapping(raw, line, what, DOCKER_KEYS)
    apt = c.strings(block.get("apt", LocList(1)), block.line_of("apt"), "apt")
    pip = c.strings(block["pip"], block.line_of("pip"), "pip") if "pip" in block else ()
    env: tuple[tuple[str, str], ...] = ()
    if "env" in block:
        env_block = c.mapping(block["env"], block.line_of("env"), "docker env")
        for key, value in env_block.items():
            if not _ENV_NAME.match(key) or not isinstance(value, (str, int, float, bool)):
                raise c.fail(env_block.line_of(key), f"docker env {key!r} must be NAME: scalar")
        env = tuple(sorted((k, str(v)) for k, v in env_block.items()))
    return DockerSpec(apt=apt, pip=tuple(pip), env=env)


def _kind(value: Any) -> str:
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if value is None:
        return "nothing"
    return f"{type(value).__name__} {value!r}"


def _closest(word: str, options: Any) -> str | None:
    import difflib

    found = difflib.get_close_matches(word, list(options), n=1, cutoff=0.6)
    return found[0] if found else None
