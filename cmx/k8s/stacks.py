"""The serving stacks' registry, the only place that knows which stacks exist, and what `cmx deploy` asks of
the stack its options choose: its objects with the shared ones in the order they are applied, its target,
record and requirements.

Each stack is an entry of the `Stack` contract (cmx.k8s.stack) in a module of its own, rendering one stack kind:
its words and titles, which `--stack` and `--llm-d-form` offer and a run records, are data in
cmx.mlperf.serving_stack.KINDS, below this layer, because the app and the packager read them too. A new stack is
one module, its kind in KINDS and one line in STACKS (in KINDS' order).
"""

from __future__ import annotations

from cmx.k8s import dynamo, llmd_kserve, llmd_pieces, vllm_stack
from cmx.k8s.manifests import JobTarget, Manifest, ServingSpec, benchmark_objects, results_volume
from cmx.k8s.prerequisites import Requirement
from cmx.k8s.stack import Stack
from cmx.k8s.stack_options import StackOptionError, StackOptions
from cmx.mlperf.serving_stack import ServingStack

STACKS: tuple[Stack, ...] = (vllm_stack.STACK, llmd_kserve.STACK, llmd_pieces.STACK, dynamo.STACK)


def stack_for(options: StackOptions) -> Stack:
    """The entry that `--stack` (and, for a stack with forms, `--llm-d-form`) choose."""
    for stack in STACKS:
        if stack.name == options.name and stack.form in ("", options.llmd_form):
            return stack
    raise StackOptionError(f"--stack {options.name!r} is not one of {', '.join(sorted({s.name for s in STACKS}))}")


def refuse_foreign(options: StackOptions, given: set[str]) -> None:
    """Refuse the options the user gave (`given`: their StackOptions field names) that belong to another stack
    than the chosen one: a --router with --stack llm-d would silently do nothing."""
    stack = stack_for(options)
    foreign = sorted(given - stack.options - {"name", "entry_url"})
    if foreign:
        flags = ", ".join("--" + f.replace("_", "-").replace("llmd", "llm-d") for f in foreign)
        form = f" --llm-d-form {stack.form}" if stack.form else ""
        raise StackOptionError(f"{flags} {'is' if len(foreign) == 1 else 'are'} not an option of --stack "
                               f"{stack.name}{form}", hint="see `cmx deploy --help` for which options each stack takes")


def check_spec(spec: ServingSpec) -> None:
    """Refuse what a stack cannot render from this spec, before anything is rendered."""
    stack_for(spec.stack).check(spec)


def serving_objects(spec: ServingSpec) -> tuple[Manifest, ...]:
    """The stack's own objects (not the results volume, not the benchmark)."""
    stack = stack_for(spec.stack)
    stack.check(spec)
    return stack.objects(spec)


def job_target(spec: ServingSpec) -> JobTarget:
    """Where the benchmark Job sends: the stack's entry point (or the user's --entry-url)."""
    return stack_for(spec.stack).target(spec)


def stack_record(spec: ServingSpec, target: JobTarget | None = None) -> ServingStack:
    """What the Job records of the stack, as far as the manifests say it (--apply adds the cluster's versions
    and nodes)."""
    stack = stack_for(spec.stack)
    return stack.record(spec, target or stack.target(spec))


def requirements(spec: ServingSpec) -> tuple[Requirement, ...]:
    """The CRDs the stack's objects need, one per custom kind it renders or KServe makes for it."""
    return stack_for(spec.stack).requirements(spec)


def all_objects(spec: ServingSpec, stack: ServingStack | None = None) -> tuple[Manifest, ...]:
    """Every object in the order they are applied: the volumes before the pods that mount them, the stack, then
    the stack's description and the benchmark Job."""
    target = job_target(spec)
    record = stack or stack_record(spec, target)
    serving = serving_objects(spec)
    volumes = [m for m in serving if m.kind == "PersistentVolumeClaim"]
    rest = [m for m in serving if m.kind != "PersistentVolumeClaim"]
    return (*volumes, results_volume(spec), *rest, *benchmark_objects(spec, record.to_json(), target))


objects = all_objects

__all__ = ["STACKS", "all_objects", "check_spec", "job_target", "objects", "refuse_foreign",
           "requirements", "serving_objects", "stack_for", "stack_record"]
