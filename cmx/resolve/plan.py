"""The Plan: a DAG of Steps, each a recipe with chosen variations, typed inputs and a cache key."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from cmx.recipe.model import DockerSpec, Recipe
from cmx.recipe.types import to_json
from cmx.secrets import Secret, public_value


@dataclass(frozen=True)
class DepEdge:
    """A step's dependency: the dep's step id and the name (`as`) the parent reads it by."""

    step: str
    as_: str | None


@dataclass(frozen=True)
class Step:
    """One step of a plan: a recipe with its chosen variations, typed inputs, the context it reads, its deps and
    its cache key. Built once by the resolver; never changed after."""

    id: str
    recipe: Recipe
    variations: tuple[str, ...]
    inputs: dict[str, Any]  # typed values; secrets are Secret objects
    origins: dict[str, str]  # where each input came from: user, with, variation, env, default
    context: dict[str, Any]  # the context keys the recipe reads, with their values
    full_context: dict[str, Any]  # every context key in force at this step (for re-running it alone)
    deps: tuple[DepEdge, ...]
    key: str  # the cache key (with `cache: {key: [...]}`, only the pinned fields enter it)
    identity: str = ""  # everything that makes the step: recipe, variations, inputs, context, deps
    docker: DockerSpec = DockerSpec()

    @property
    def name(self) -> str:
        return self.recipe.name

    @property
    def cacheable(self) -> bool:
        return self.recipe.cache.enabled

    def public_inputs(self) -> dict[str, Any]:
        """Inputs fit to print or store: secrets left out, a URL's credentials masked, values JSON-friendly."""
        return {k: public_value(to_json(v)) for k, v in self.inputs.items() if not isinstance(v, Secret)}

    def fetches(self) -> list[str]:
        """The URLs among this step's inputs: what it may download when it runs (not one for a variation it did
        not pick, like a dataset's URL under `_tiny`, nor one an input it is `unless` has a value for, like the
        hub under `--input model_path=DIR`)."""
        specs = self.recipe.inputs

        def used(name: str) -> bool:
            spec = specs[name]
            return (spec.needs is None or spec.needs in self.variations) and \
                (spec.unless is None or self.inputs.get(spec.unless) is None)

        return [public_value(v) for k, v in self.inputs.items() if specs[k].type == "url" and v and used(k)]


@dataclass
class Plan:
    query: str
    steps: dict[str, Step]  # in dependency order: every step after its deps
    root: str
    parents: dict[str, list[str]] = field(default_factory=dict)
    # what it was asked with: the user's inputs (`name`, `recipe.name`) and context, as given
    inputs: dict[str, Any] = field(default_factory=dict)
    context: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.parents:
            for step in self.steps.values():
                for edge in step.deps:
                    self.parents.setdefault(edge.step, []).append(step.id)

    def __iter__(self) -> Iterator[Step]:
        return iter(self.steps.values())

    def __len__(self) -> int:
        return len(self.steps)

    @property
    def root_step(self) -> Step:
        return self.steps[self.root]

    def statuses(self, is_cached: Callable[[Step], bool]) -> dict[str, str]:
        """What a run does with each step: "build" (cacheable, not cached), "run" (not
        cacheable), "cached", or "idle" (not needed: only cached steps depend on it).

        A run walks down from the root and a cached step ends the walk, so `is_cached` is
        asked only for the steps the walk reaches.
        """
        status: dict[str, str] = {}
        todo = [self.root]
        while todo:
            sid = todo.pop()
            if sid in status:
                continue
            step = self.steps[sid]
            if step.cacheable and is_cached(step):
                status[sid] = "cached"
            else:
                status[sid] = "build" if step.cacheable else "run"
                todo.extend(e.step for e in step.deps)
        return {sid: status.get(sid, "idle") for sid in self.steps}

    def chain_to(self, step_id: str) -> list[str]:
        """Recipe names from the root down to `step_id` (one path, the first found)."""
        chain = [step_id]
        while chain[-1] != self.root and self.parents.get(chain[-1]):
            chain.append(self.parents[chain[-1]][0])
        return [self.steps[s].name for s in reversed(chain)]

    def to_json(self, cached: dict[str, bool] | None = None) -> dict[str, Any]:
        return {
            "query": self.query,
            "root": self.root,
            "steps": [
                {
                    "id": s.id,
                    "recipe": s.name,
                    "variations": list(s.variations),
                    "inputs": s.public_inputs(),
                    "context": to_json(s.context),
                    "key": s.key,
                    "cacheable": s.cacheable,
                    "cached": bool(cached.get(s.id)) if cached is not None else None,
                    "fetches": s.fetches(),
                    "deps": [e.step for e in s.deps],
                }
                for s in self.steps.values()
            ],
        }
