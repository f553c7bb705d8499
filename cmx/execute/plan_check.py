"""Plan-time checks: a recipe's run.py may define `check(step)`, which judges the step's inputs, variations and
context alone (no artefact, no dependency's output) and raises a CmxError for what would fail later; it may
return lines that `cmx plan` and the lock show under the step (what it will do that its inputs do not say).

`cmx plan` and `cmx run` call it for every step of a plan before any step runs, so a mistyped scenario, a
missing target, or two choices that exclude each other fail at once, not after hours of downloads. The resolver
stays pure: it never imports a recipe's code; this is the execute layer's, which is where run.py is loaded.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType, ModuleType
from typing import Any

from cmx.errors import StepError
from cmx.recipe.model import Recipe
from cmx.resolve.plan import Plan, Step


def recipe_module(recipe: Recipe) -> ModuleType:
    """The recipe's run.py (its own, or its base's), imported under a name of its recipe and digest."""
    path = recipe.run_path
    name = f"cmx_recipe_{recipe.name.replace('-', '_')}_{recipe.digest[:8]}"
    loaded = sys.modules.get(name)
    if loaded is not None:
        return loaded
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise StepError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling in run.py need the module registered
    spec.loader.exec_module(module)
    return module


def chosen_variations(step: Step) -> dict[str, str]:
    """Each variation group of the step's recipe -> the variation the step has in it (as StepContext reads them)."""
    return {group: v.name for group, options in step.recipe.groups.items() for v in options
            if v.name in step.variations}


@dataclass(frozen=True)
class PlannedStep:
    """A step as its check sees it: what StepContext offers before anything ran (no deps, no workdir)."""

    name: str
    inputs: Mapping[str, Any]
    params: Mapping[str, Any]
    context: Mapping[str, Any]
    variations: tuple[str, ...]
    chosen: Mapping[str, str]  # group -> its chosen variation

    @classmethod
    def of(cls, step: Step) -> PlannedStep:
        return cls(step.name, MappingProxyType(dict(step.inputs)), MappingProxyType(dict(step.recipe.params)),
                   MappingProxyType(dict(step.full_context)), step.variations,
                   MappingProxyType(chosen_variations(step)))

    def variation(self, group: str) -> str:
        """The variation chosen in `group`, as StepContext.variation."""
        try:
            return self.chosen[group]
        except KeyError:
            raise KeyError(f"recipe {self.name} has no variation group {group!r}") from None

    def flag(self, name: str) -> bool:
        """Whether the flag `_name` was given, as StepContext.flag."""
        return name in self.variations and name not in self.chosen.values()


def defines_check(recipe: Recipe) -> bool:
    """Whether the recipe's run.py defines `check` at its top level, read as text: importing every step's run.py
    (and what it imports) to find out would cost `cmx plan` more than the resolution itself."""
    if not recipe.has_run:
        return False
    try:
        text = recipe.run_path.read_text(encoding="utf-8")
    except OSError:
        return False
    return any(line.startswith("def check(") for line in text.splitlines())


def check_plan(plan: Plan) -> dict[str, tuple[str, ...]]:
    """Run every step's `check`, dependencies first; the first CmxError stops it (before any step ran). A check may
    return lines the plan shows under its step (what the step will do that its inputs alone do not say: an MLPerf
    app's find-performance); returned here by step id, for the steps that have any."""
    notes: dict[str, tuple[str, ...]] = {}
    for step in plan:
        if not defines_check(step.recipe):
            continue
        check = getattr(recipe_module(step.recipe), "check", None)
        if callable(check):
            said = check(PlannedStep.of(step))
            if said:
                notes[step.id] = tuple(str(line) for line in said)
    return notes


__all__ = ["PlannedStep", "check_plan", "chosen_variations", "recipe_module"]
