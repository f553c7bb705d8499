"""The Recipe model: what a validated recipe.yaml says, as frozen dataclasses."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cmx.recipe.expr import Expr
from cmx.recipe.query import Query


@dataclass(frozen=True)
class InputSpec:
    """A typed parameter. `required` when the YAML gives no `default` key at all;
    `default: null` makes it optional with no value."""

    name: str
    type: str
    default: Any = None
    required: bool = False
    help: str = ""
    env: str | None = None
    choices: tuple[str, ...] = ()
    line: int = 0
    origin: Path | None = None  # the base's folder, when a base's recipe.yaml declared it (see Recipe.where)
    needs: str | None = None  # the variation or flag it is for: given without it, resolution refuses the query
    unless: str | None = None  # another input whose value makes this one unused (a URL not fetched: `cmx plan`)


@dataclass(frozen=True)
class OutputSpec:
    name: str
    type: str
    help: str = ""


@dataclass(frozen=True)
class DockerSpec:
    """What a step adds to a rendered image."""

    apt: tuple[str, ...] = ()
    pip: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()

    def __bool__(self) -> bool:
        return bool(self.apt or self.pip or self.env)


@dataclass(frozen=True)
class WithValue:
    """A value a parent passes to a dep's input.

    kind "value": a literal; "ref": exactly `{{ inputs.x }}` or `{{ context.x }}`, passed
    through with its type; "template": any other jinja2 template, rendered to text.
    """

    kind: str
    value: Any
    namespace: str = ""


@dataclass(frozen=True)
class DepSpec:
    query: Query
    with_: tuple[tuple[str, WithValue], ...] = ()
    when: Expr | None = None
    as_: str | None = None
    line: int = 0
    origin: Path | None = None  # the base's folder, when a base's recipe.yaml declared it: `with` paths are its


@dataclass(frozen=True)
class Variation:
    name: str
    group: str | None  # None: an independent flag
    default: bool = False
    summary: str = ""
    inputs: tuple[tuple[str, Any], ...] = ()
    context: tuple[tuple[str, Any], ...] = ()
    deps: tuple[DepSpec, ...] = ()
    docker: DockerSpec = DockerSpec()
    line: int = 0


@dataclass(frozen=True)
class Fingerprint:
    """Cheap facts about the machine that enter a step's key, read without running anything:
    `files` by stat (absent is a fact too), `programs` found on PATH by path and stat, `env`
    by value, and with `machine` the kernel, architecture, host name, CPU count and memory.
    A detection step keyed on these is re-run only when one of them changes."""

    files: tuple[str, ...] = ()
    programs: tuple[str, ...] = ()
    env: tuple[str, ...] = ()
    machine: bool = False


@dataclass(frozen=True)
class CacheSpec:
    """`enabled`: outputs are stored in the cache. `key`: fields that pin the content
    (inputs.X, context.X, variations, deps.AS); when set, the recipe's files do not
    enter the key. `fingerprint`: machine facts that also enter the key."""

    enabled: bool = False
    key: tuple[str, ...] | None = None
    fingerprint: Fingerprint | None = None


@dataclass(frozen=True)
class Recipe:
    """A validated recipe; one that `extends` a base holds the merged result (docs/recipes.md, "Extending")."""

    name: str
    summary: str
    tags: tuple[str, ...]
    path: Path  # the recipe folder
    inputs: dict[str, InputSpec] = field(default_factory=dict)
    groups: dict[str, tuple[Variation, ...]] = field(default_factory=dict)
    flags: dict[str, Variation] = field(default_factory=dict)
    context: tuple[str, ...] = ()
    deps: tuple[DepSpec, ...] = ()
    cache: CacheSpec = CacheSpec()
    outputs: dict[str, OutputSpec] = field(default_factory=dict)
    docker: DockerSpec = DockerSpec()
    files: tuple[str, ...] = ()
    has_run: bool = False
    digest: str = ""  # sha256 of recipe.yaml, run.py and the listed files, and of its base's digest
    source: str = ""  # the registry source it came from
    abstract: bool = False  # a base for others: no query ever selects it
    extends: str | None = None  # the base's name
    bases: tuple[Path, ...] = ()  # the folders of its base, the base's base..., nearest first
    run_from: Path | None = None  # the folder whose run.py runs: its own, or the nearest base's that has one
    params: dict[str, Any] = field(default_factory=dict)  # fixed values its run.py reads as ctx.params

    @property
    def yaml_path(self) -> Path:
        return self.path / "recipe.yaml"

    @property
    def run_path(self) -> Path:
        return (self.run_from or self.path) / "run.py"

    def where(self, line: int, origin: Path | None = None) -> str:
        """file:line of a line of this recipe.yaml, or of its base's when `origin` (a spec's) names the base."""
        return f"{(origin or self.path) / 'recipe.yaml'}:{line}"

    def variation(self, name: str) -> Variation | None:
        if name in self.flags:
            return self.flags[name]
        for options in self.groups.values():
            for v in options:
                if v.name == name:
                    return v
        return None

    def variation_names(self) -> list[str]:
        return [v.name for options in self.groups.values() for v in options] + list(self.flags)

    def matches(self, query: Query) -> bool:
        """All of the query's tags are carried (the name counts as a tag), none excluded."""
        carried = self.all_tags
        return all(t in carried for t in query.tags) and not any(t in carried for t in query.exclude)

    @property
    def all_tags(self) -> frozenset[str]:
        return frozenset(self.tags) | {self.name}
