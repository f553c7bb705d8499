"""Resolution: query -> Plan. Pure: reads recipes through a provider, runs nothing, prints nothing."""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from cmx.errors import InputError, PlanError, QueryError
from cmx.recipe.expr import ExprEvalError, evaluate_with
from cmx.recipe.model import DepSpec, DockerSpec, Recipe, Variation, WithValue
from cmx.recipe.query import Query, having_variations, query_of
from cmx.recipe.types import TypeMismatch, coerce, to_json
from cmx.resolve.plan import DepEdge, Plan, Step
from cmx.secrets import Secret, public_value

MAX_DEPTH = 64


class RecipeInfoLike(Protocol):
    # read-only properties, so that an immutable record (RecipeIndex's NamedTuple) satisfies it
    @property
    def name(self) -> str: ...

    @property
    def tags(self) -> tuple[str, ...]: ...


class RecipeProvider(Protocol):
    """What resolution needs from the outside world (the registry index, or a test's dict)."""

    def find(self, query: Query) -> Sequence[RecipeInfoLike]:
        """Recipes carrying every tag of `query` (a name counts as a tag) and no excluded one."""

    def get(self, name: str) -> Recipe:
        """The full recipe by name."""

    def all_tags(self) -> set[str]:
        """Every tag and name known, for did-you-mean suggestions."""


@dataclass
class _Given:
    """A value offered for an input, with where it came from (for errors and `cmx plan`)."""

    value: Any
    origin: str
    where: str = ""
    base: Path | None = None  # the folder a relative path in it is relative to (the parent recipe's)


@dataclass(frozen=True)
class _Node:
    """A step as resolution finds it, known by its identity (its deps too); the Plan's Steps are made from the
    nodes once, at the end, when every recipe's count and so every step's readable id is known."""

    recipe: Recipe
    variations: tuple[str, ...]
    inputs: dict[str, Any]
    origins: dict[str, str]
    context: dict[str, Any]
    full_context: dict[str, Any]
    deps: tuple[DepEdge, ...]  # by the deps' identities
    key: str
    identity: str
    docker: DockerSpec

    @property
    def name(self) -> str:
        return self.recipe.name


@dataclass
class _State:
    provider: RecipeProvider
    user_inputs: dict[str | None, dict[str, Any]]  # recipe name (None: the root) -> name -> raw value
    environ: Mapping[str, str]
    nodes: dict[str, _Node] = field(default_factory=dict)  # by identity
    memo: dict[str, _Node] = field(default_factory=dict)  # by identity + full context
    used_qualified: set[str] = field(default_factory=set)


def resolve(provider: RecipeProvider, query: str | Query, *, inputs: Mapping[str, Any] | None = None,
            context: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None) -> Plan:
    """Resolve `query` into a Plan.

    `inputs` are the user's: `name` for the root recipe, `recipe.name` for every step of
    that recipe. `context` seeds the run-wide context (as `--context device=rocm` does).
    `environ` is read for inputs that declare `env:` (default: os.environ).
    """
    query = query_of(query)
    user: dict[str | None, dict[str, Any]] = {}
    for name, value in (inputs or {}).items():
        recipe_name, dot, input_name = name.rpartition(".")
        user.setdefault(recipe_name if dot else None, {})[input_name] = value
    state = _State(provider, user, os.environ if environ is None else environ)
    recipe = select_root(provider, query)
    root = _resolve_step(state, recipe, query.variations, {}, dict(context or {}), stack=[], where=None)
    for qualified in user:
        if qualified is not None and qualified not in state.used_qualified:
            names = sorted({n.name for n in state.nodes.values()})
            raise InputError(f"--input {qualified}.…: no step of recipe {qualified!r} is in this plan",
                             hint=f"recipes in the plan: {', '.join(names)}")
    ids = _step_ids(state.nodes)
    steps = {ids[n.identity]: _step(n, ids) for n in state.nodes.values()}  # nodes come after their deps
    return Plan(query=str(query), steps=steps, root=ids[root.identity], inputs=dict(inputs or {}),
                context=dict(context or {}))


def _step_ids(nodes: dict[str, _Node]) -> dict[str, str]:
    """Readable step ids by identity: the recipe name, or name:key8 when a recipe appears twice."""
    counts: dict[str, int] = {}
    for node in nodes.values():
        counts[node.name] = counts.get(node.name, 0) + 1
    return {ident: node.name if counts[node.name] == 1 else f"{node.name}:{ident[:8]}" for ident, node in nodes.items()}


def _step(node: _Node, ids: dict[str, str]) -> Step:
    return Step(id=ids[node.identity], recipe=node.recipe, variations=node.variations, inputs=node.inputs,
                origins=node.origins, context=node.context, full_context=node.full_context,
                deps=tuple(DepEdge(ids[e.step], e.as_) for e in node.deps), key=node.key, identity=node.identity,
                docker=node.docker)


def select_root(provider: RecipeProvider, query: str | Query) -> Recipe:
    """The recipe a plan of `query` starts from, as `resolve` picks it; QueryError when none or several match."""
    return _select(provider, query_of(query), where=None)


def _select(provider: RecipeProvider, query: Query, where: str | None) -> Recipe:
    found = provider.find(query)
    if len(found) > 1 and query.variations:  # as `cmx find`: only recipes having the variations asked for
        found = having_variations(found, query.variations, provider.get) or found
    if len(found) == 1:
        return provider.get(found[0].name)
    if not found:
        raise QueryError(f"no recipe matches {str(query)!r}", where=where, hint=_suggest(provider, query))
    lines = [f"{f.name} (tags: {' '.join(t for t in f.tags if t not in query.tags) or '-'})" for f in found]
    raise QueryError(f"{str(query)!r} matches {len(found)} recipes: {'; '.join(lines)}", where=where,
                     hint="add a tag that tells them apart, exclude one with -tag, or use the recipe's name")


def _closest(word: str, known: set[str]) -> list[str]:
    """Up to three known words like WORD, those about as close as the closest: 'pyton' suggests python, not
    python-only too."""
    import difflib

    ratios = sorted(((difflib.SequenceMatcher(None, word, k).ratio(), k) for k in known), key=lambda r: (-r[0], r[1]))
    scored = [(score, k) for score, k in ratios[:3] if score >= 0.6]
    return [k for score, k in scored if score >= scored[0][0] - 0.1] if scored else []


def _suggest(provider: RecipeProvider, query: Query) -> str:
    known = provider.all_tags()
    unknown = [t for t in query.tags if t not in known]
    if unknown:
        parts = []
        for tag in unknown:
            close = _closest(tag, known)
            parts.append(f"{tag!r}: did you mean {', '.join(close)}?" if close else f"no recipe has tag {tag!r}")
        return "; ".join(parts) + " (`cmx find TAG` lists recipes)"
    best: list[tuple[int, str]] = []
    for tag in query.tags:
        for info in provider.find(Query((tag,))):
            best.append((sum(t in info.tags or t == info.name for t in query.tags), info.name))
    best = sorted(set(best), key=lambda x: (-x[0], x[1]))[:3]
    closest = ", ".join(name for _, name in best)
    return f"each tag exists but no recipe carries them all; closest: {closest}" if closest else "see `cmx find`"


def _choose_variations(recipe: Recipe, requested: Iterable[str], inherited: Mapping[str, Any],
                       where: str | None) -> tuple[dict[str, Variation], list[Variation], set[str]]:
    """Pick one variation per group (requested, else the one matching the context, else the
    default) plus the requested flags. Returns (group -> variation, flags, names picked
    implicitly: by default or by context)."""
    chosen: dict[str, Variation] = {}
    flags: list[Variation] = []
    implicit: set[str] = set()
    for name in requested:
        v = recipe.variation(name)
        if v is None:
            raise QueryError(f"recipe {recipe.name!r} has no variation {'_' + name!r}", where=where,
                             hint=_variation_hint(recipe, name))
        if v.group is None:
            flags.append(v)
            continue
        if v.group in chosen and chosen[v.group].name != name:
            raise QueryError(f"_{chosen[v.group].name} and _{name} both belong to group {v.group!r} of "
                             f"{recipe.name!r}; choose one", where=where)
        for key, value in v.context:
            if key in inherited and inherited[key] != value:
                raise PlanError(f"variation _{name} of {recipe.name!r} sets context {key}={value!r}, "
                                f"but the run has {key}={inherited[key]!r}", where=where,
                                hint=f"drop _{name}, or choose the variation that matches {key}={inherited[key]!r}")
        chosen[v.group] = v
    for group, options in recipe.groups.items():
        if group in chosen:
            continue
        matching = [v for v in options if v.context and all(inherited.get(k, _MISSING) == val for k, val in v.context)]
        if len(matching) == 1:
            chosen[group] = matching[0]
            implicit.add(matching[0].name)
            continue
        default = next((v for v in options if v.default), None)
        if default is not None:
            for key, value in default.context:
                if key in inherited and inherited[key] != value:
                    raise PlanError(f"no variation of group {group!r} in {recipe.name!r} matches context "
                                    f"{key}={inherited[key]!r}, and its default _{default.name} sets {value!r}",
                                    where=where, hint=f"add a variation to {recipe.name} for {key}={inherited[key]!r}")
            chosen[group] = default
            implicit.add(default.name)
    return chosen, flags, implicit


_MISSING = object()


def _variation_hint(recipe: Recipe, name: str) -> str:
    import difflib

    parts = [f"{g}: {' '.join('_' + v.name for v in opts)}" for g, opts in recipe.groups.items()]
    if recipe.flags:
        parts.append(f"flags: {' '.join('_' + n for n in recipe.flags)}")
    close = difflib.get_close_matches(name, recipe.variation_names(), n=1)
    prefix = f"did you mean _{close[0]}? " if close else ""
    return prefix + ("variations: " + "; ".join(parts) if parts else f"{recipe.name} has no variations")


def _environment_hint(recipe: Recipe, name: str) -> str:
    """For an input named like an environment variable (HF_TOKEN): the input that reads it, or how such a
    variable is given; "" for any other name."""
    reader = next((n for n, spec in recipe.inputs.items() if spec.env == name), None)
    if reader:
        return (f"{name} is the environment variable input {reader!r} reads: export {name}=..., or give "
                f"--input {reader}=...")
    if re.fullmatch(r"[A-Z][A-Z0-9_]*", name):
        return (f"{name} looks like an environment variable, not an input: an input that takes it reads it from the "
                f"environment (export {name}=...; `cmx show RECIPE` lists each input's variable: the model "
                "recipes' `token` reads HF_TOKEN)")
    return ""


def _resolve_inputs(state: _State, recipe: Recipe, variations: list[Variation], implicit: set[str],
                    given: dict[str, _Given], is_root: bool,
                    where: str | None) -> tuple[dict[str, Any], dict[str, str]]:
    user_raw: dict[str, Any] = dict(state.user_inputs.get(None, {})) if is_root else {}
    if recipe.name in state.user_inputs:
        state.used_qualified.add(recipe.name)
        user_raw.update(state.user_inputs[recipe.name])
    for name in user_raw:
        if name not in recipe.inputs:
            import difflib

            valid = ", ".join(f"{n} ({s.type})" for n, s in recipe.inputs.items()) or "none"
            close = difflib.get_close_matches(name, list(recipe.inputs), n=1)
            raise InputError(f"recipe {recipe.name!r} has no input {name!r}",
                             hint=_environment_hint(recipe, name) or
                             (f"did you mean {close[0]!r}? " if close else "") + f"valid inputs: {valid}")
    # variations picked by default or by context come first, so that one the query asked for
    # replaces their value; any other disagreement is an error, never an order-dependent pick
    from_variation: dict[str, tuple[Any, str]] = {}
    for v in sorted(variations, key=lambda v: v.name not in implicit):
        for name, value in v.inputs:
            previous = from_variation.get(name)
            if previous is not None and previous[0] != value and \
                    not (previous[1] in implicit and v.name not in implicit):
                both_implicit = previous[1] in implicit
                raise InputError(f"variations _{previous[1]} and _{v.name} of {recipe.name!r} set input "
                                 f"{name!r} to {previous[0]!r} and {value!r}", where=where,
                                 hint=f"neither was asked for: choose _{previous[1]} or _{v.name} explicitly"
                                 if both_implicit else "choose one of the two variations")
            from_variation[name] = (value, v.name)
    values: dict[str, Any] = {}
    origins: dict[str, str] = {}
    for name, spec in recipe.inputs.items():
        if name in user_raw:
            # the command line outranks every variation, chosen or default (docs/architecture.md § Resolution:
            # command line > parent's `with` > variation > default): the rest of what the variation sets still applies
            values[name], origins[name] = _coerce(recipe, name, user_raw[name], "command line"), "user"
        elif name in given:
            values[name] = _coerce(recipe, name, given[name].value, f"`with` at {given[name].where}",
                                   base=given[name].base)
            origins[name] = "with"
        elif name in from_variation:
            values[name], origins[name] = _coerce(recipe, name, from_variation[name][0], "variation"), "variation"
        elif spec.env and spec.env in state.environ:
            values[name], origins[name] = _coerce(recipe, name, state.environ[spec.env], f"${spec.env}"), "env"
        elif not spec.required:
            values[name] = None if spec.default is None else _coerce(recipe, name, spec.default, "default")
            origins[name] = "default"
        else:
            how = f" or set ${spec.env}" if spec.env else ""
            flag = f"--input {name}=..." if is_root else f"--input {recipe.name}.{name}=..."
            raise InputError(f"input {name!r} of {recipe.name!r} is required and has no value",
                             where=where, hint=f"give it with {flag}{how}" + (f" ({spec.help})" if spec.help else ""))
    for name in given:
        if name not in recipe.inputs:
            valid = ", ".join(recipe.inputs) or "none"
            raise PlanError(f"`with` passes input {name!r}, which {recipe.name!r} does not declare",
                            where=given[name].where, hint=f"inputs of {recipe.name}: {valid}")
    return values, origins


def _check_needs(recipe: Recipe, inputs: Mapping[str, Any], origins: Mapping[str, str],
                 chosen: Mapping[str, Variation], flags: set[str], given: Mapping[str, _Given],
                 where: str | None) -> None:
    """An input given (by the user, or a parent's `with`) for a variation the query does not choose is refused
    here, before any step runs, rather than by the step after its deps have run."""
    picked = {v.name for v in chosen.values()} | flags
    for name, spec in recipe.inputs.items():
        if spec.needs is None or spec.needs in picked or inputs[name] is None or origins[name] not in ("user", "with"):
            continue
        group = next((g for g, options in recipe.groups.items() if any(v.name == spec.needs for v in options)), None)
        instead = f" (it runs _{chosen[group].name})" if group is not None and group in chosen else ""
        if origins[name] == "user":
            raise InputError(f"--input {name} is for _{spec.needs}, which the query does not choose{instead}",
                             where=where, hint=f"add _{spec.needs} to the query, or drop --input {name}")
        raise PlanError(f"`with` passes input {name!r} to {recipe.name!r}, which is for _{spec.needs}, and the dep "
                        f"does not choose it{instead}", where=given[name].where,
                        hint=f"add _{spec.needs} to the dep's tags, or do not pass {name!r}")


def _coerce(recipe: Recipe, name: str, value: Any, origin: str, base: Path | None = None) -> Any:
    spec = recipe.inputs[name]
    if origin in ("default", "variation"):
        base = recipe.path
    if spec.type == "path" and base is not None and isinstance(value, str) \
            and not os.path.isabs(os.path.expanduser(value)):
        value = str(base / value)  # a relative path written in a recipe is relative to that recipe
    try:
        return coerce(value, spec.type, spec.choices)
    except TypeMismatch as exc:
        raise InputError(f"input {name!r} of {recipe.name!r} (from {origin}): {exc}",
                         where=recipe.where(spec.line, spec.origin) if origin in ("default", "variation") else None
                         ) from None


def _with_values(dep: DepSpec, recipe: Recipe, inputs: Mapping[str, Any], context: Mapping[str, Any],
                 variations: list[str]) -> dict[str, _Given]:
    where = recipe.where(dep.line, dep.origin)
    out: dict[str, _Given] = {}
    for name, wv in dep.with_:
        value = _with_value(wv, inputs, context, variations, where)
        if value is not None:  # an unset optional input passed on leaves the dep's own default
            # a relative path written in a `with` is relative to the folder of the recipe.yaml it is written in
            out[name] = _Given(value, "with", where, (dep.origin or recipe.path) if wv.kind != "ref" else None)
    return out


def _with_value(wv: WithValue, inputs: Mapping[str, Any], context: Mapping[str, Any], variations: list[str],
                where: str) -> Any:
    if wv.kind == "value":
        return wv.value
    if wv.kind == "ref":
        source = inputs if wv.namespace == "inputs" else context
        return source.get(wv.value)
    import jinja2  # only for real templates; `{{ inputs.x }}` alone is passed through without it
    import jinja2.sandbox  # resolution runs nothing: a template must not reach os through __globals__

    env = jinja2.sandbox.SandboxedEnvironment(undefined=jinja2.StrictUndefined, autoescape=False,
                                              keep_trailing_newline=False)
    # secrets stay out of rendered text (it would enter keys and logs): pass one whole, as
    # `{{ inputs.token }}`, which hands the dep the Secret object itself
    visible = {k: v for k, v in inputs.items() if not isinstance(v, Secret)}
    try:
        return env.from_string(wv.value).render(inputs=visible, context=context, variations=variations)
    except jinja2.UndefinedError as exc:
        hidden = [k for k, v in inputs.items() if isinstance(v, Secret) and k in wv.value]
        hint = (f"secret input {hidden[0]!r} cannot be part of a text template; pass it whole as "
                f"`{{{{ inputs.{hidden[0]} }}}}`") if hidden else None
        raise PlanError(f"template {wv.value!r} failed: {exc}", where=where, hint=hint) from None
    except jinja2.TemplateError as exc:
        raise PlanError(f"template {wv.value!r} failed: {exc}", where=where) from None


def _resolve_step(state: _State, recipe: Recipe, requested: Iterable[str], given: dict[str, _Given],
                  inherited: dict[str, Any], stack: list[tuple[str, str]], where: str | None) -> _Node:
    if len(stack) > MAX_DEPTH:
        raise PlanError(f"dependencies are nested more than {MAX_DEPTH} deep below {stack[0][0]!r}", where=where)
    chosen, flags, implicit = _choose_variations(recipe, requested, inherited, where)
    variations = [*chosen.values(), *flags]
    context = dict(inherited)
    for v in variations:
        context.update(v.context)
    inputs, origins = _resolve_inputs(state, recipe, variations, implicit, given, is_root=not stack, where=where)
    _check_needs(recipe, inputs, origins, chosen, {v.name for v in flags}, given, where)
    read_context = {k: context[k] for k in recipe.context if k in context}
    names = tuple(v.name for v in variations)
    key_inputs = _key_inputs(recipe, inputs)
    this = _digest({"r": recipe.name, "d": recipe.digest, "v": names, "i": key_inputs, "c": to_json(read_context)})
    memo_key = this + _digest(to_json(context))
    if memo_key in state.memo:
        return state.memo[memo_key]
    for depth, (_, ident) in enumerate(stack):
        if ident == this:
            cycle = [n for n, _ in stack[depth:]] + [recipe.name]
            raise PlanError(f"dependency cycle: {' → '.join(cycle)}", where=where,
                            hint="break the cycle: one of these recipes must not depend on the next")
    stack.append((recipe.name, this))
    children: list[tuple[str | None, _Node]] = []
    chosen_names = {g: v.name for g, v in chosen.items()}
    flag_names = frozenset(v.name for v in flags)
    for dep in [*recipe.deps, *(d for v in variations for d in v.deps)]:
        dep_where = recipe.where(dep.line, dep.origin)
        if dep.when is not None:
            try:
                if not evaluate_with(dep.when, inputs, read_context, chosen_names, flag_names):
                    continue
            except ExprEvalError as exc:
                raise PlanError(f"`when: {dep.when.source}`: {exc}", where=dep_where) from None
        child_recipe = _select(state.provider, dep.query, where=dep_where)
        child_given = _with_values(dep, recipe, inputs, read_context, list(names))
        child = _resolve_step(state, child_recipe, dep.query.variations, child_given, context, stack, dep_where)
        children.append((dep.as_, child))
    stack.pop()
    # steps merge by identity; the cache key may pin fewer fields, so two distinct steps can
    # share one cache entry (a download asked for with different unpinned inputs)
    identity = _full_digest(recipe, names, key_inputs, read_context, [(a, c.identity) for a, c in children])
    if recipe.cache.key is not None:
        key = _pinned_key(recipe, names, key_inputs, read_context, {a: c.key for a, c in children if a})
    elif all(c.key == c.identity for _, c in children):
        key = identity
    else:
        key = _full_digest(recipe, names, key_inputs, read_context, [(a, c.key) for a, c in children])
    if recipe.cache.fingerprint is not None:
        from cmx.resolve.fingerprint import take

        key = _digest({"key": key, "fingerprint": take(recipe.cache.fingerprint, state.environ)})
    node = state.nodes.get(identity)
    if node is None:
        docker = _merge_docker([recipe.docker, *(v.docker for v in variations)])
        node = _Node(recipe=recipe, variations=names, inputs=inputs, origins=origins, context=read_context,
                     full_context=context, deps=tuple(DepEdge(c.identity, a) for a, c in children), key=key,
                     identity=identity, docker=docker)
        state.nodes[identity] = node
    state.memo[memo_key] = node
    return node


def _key_inputs(recipe: Recipe, inputs: Mapping[str, Any]) -> dict[str, Any]:
    """Inputs as they enter a key: secrets never, nor a URL's password (the same bytes whoever fetches them); a
    path by its stamp (see _path_stamp)."""
    out: dict[str, Any] = {}
    for name, value in inputs.items():
        if isinstance(value, Secret) or recipe.inputs[name].type == "secret":  # given or not: never in a key
            continue
        if recipe.inputs[name].type == "path" and value is not None:
            out[name] = _path_stamp(value)
        else:
            out[name] = public_value(to_json(value))
    return out


def _path_stamp(path: Any) -> list[Any]:
    """A path input is used in place, never copied or hashed: it is keyed by its path, size and
    mtime; a folder also by the names, sizes and mtimes of its entries (one level down), digested."""
    from cmx.resolve.fingerprint import path_facts

    facts = path_facts(path)
    return [*facts[:3], _digest(facts[3])] if len(facts) > 3 else facts


def _full_digest(recipe: Recipe, variations: tuple[str, ...], key_inputs: dict[str, Any],
                 context: Mapping[str, Any], deps: list[tuple[str | None, str]]) -> str:
    return _digest({"recipe": recipe.name, "files": recipe.digest, "variations": sorted(variations),
                    "inputs": key_inputs, "context": to_json(context), "deps": sorted((a or "", k) for a, k in deps)})


def _pinned_key(recipe: Recipe, variations: tuple[str, ...], key_inputs: dict[str, Any],
                context: Mapping[str, Any], deps: dict[str | None, str]) -> str:
    fields: dict[str, Any] = {}
    for f in recipe.cache.key or ():
        ns, _, name = f.partition(".")
        fields[f] = (key_inputs.get(name) if ns == "inputs" else to_json(context.get(name)) if ns == "context"
                     else sorted(variations) if f == "variations" else deps.get(name))
    return _digest({"recipe": recipe.name, "fields": fields})


def _digest(payload: Any) -> str:
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _merge_docker(specs: list[DockerSpec]) -> DockerSpec:
    apt: dict[str, None] = {}
    pip: dict[str, None] = {}
    env: dict[str, str] = {}
    for spec in specs:
        apt.update(dict.fromkeys(spec.apt))
        pip.update(dict.fromkeys(spec.pip))
        env.update(spec.env)
    return DockerSpec(apt=tuple(apt), pip=tuple(pip), env=tuple(sorted(env.items())))
