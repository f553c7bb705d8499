"""The serving stacks are entries of one registry: every choice of --stack (and --llm-d-form) picks exactly one,
and no k8s module outside the entries asks which stack it is serving."""

from __future__ import annotations

import ast
import re
from itertools import product
from pathlib import Path

import pytest

from cmx.k8s import stacks
from cmx.k8s.stack_options import LLMD_FORMS, STACK_NAMES, StackOptions
from cmx.templates import templates_dir
from tests.k8s.conftest import make_spec

K8S = Path(stacks.__file__).parent
ENTRY_MODULES = {"vllm_stack.py", "llmd.py", "llmd_kserve.py", "llmd_pieces.py", "dynamo.py"}
WORDS = {"vllm", "llm-d", "dynamo", "kserve", "pieces"}


def test_every_stack_choice_picks_one_entry_and_every_entry_is_chosen() -> None:
    chosen = []
    for name, form in product(STACK_NAMES, LLMD_FORMS):
        options = StackOptions(name=name, llmd_form=form)
        matching = [s for s in stacks.STACKS if s.name == name and s.form in ("", form)]
        assert len(matching) == 1, (name, form, matching)
        assert stacks.stack_for(options) is matching[0]
        chosen.append(matching[0])
    assert {id(s) for s in chosen} == {id(s) for s in stacks.STACKS}


@pytest.mark.parametrize("stack", stacks.STACKS, ids=lambda s: f"{s.name}{'-' + s.form if s.form else ''}")
def test_each_entry_records_itself_with_the_target_it_names(stack: stacks.Stack) -> None:
    spec = make_spec("cuda", stack=StackOptions(name=stack.name, llmd_form=stack.form or "kserve"))
    target = stack.target(spec)
    record = stack.record(spec, target)
    assert (record.name, record.form, record.entry_url) == (stack.name, stack.form, target.url)
    assert stack.objects(spec), "an entry renders objects of its own"


def _name_tests(path: Path) -> list[str]:
    """Comparisons with a stack's or form's name, and reads of StackOptions' removed kserve/pieces tests."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            consts = {o.value for o in operands if isinstance(o, ast.Constant) and isinstance(o.value, str)}
            for o in operands:
                if isinstance(o, ast.Tuple | ast.Set | ast.List):
                    consts |= {e.value for e in o.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
            if consts & WORDS:
                found.append(f"{path.name}:{node.lineno}")
        if isinstance(node, ast.Dict) and {k.value for k in node.keys if isinstance(k, ast.Constant)} & WORDS:
            found.append(f"{path.name}:{node.lineno}")
        if isinstance(node, ast.Attribute) and node.attr in {"kserve", "pieces"}:
            found.append(f"{path.name}:{node.lineno}")
    return found


def test_no_k8s_module_but_the_entries_branches_on_a_stack_name() -> None:
    others = [p for p in sorted(K8S.glob("*.py")) if p.name not in ENTRY_MODULES]
    assert any(p.name == "stacks.py" for p in others)
    assert [hit for p in others for hit in _name_tests(p)] == []


def test_the_name_scan_sees_a_branch_on_a_stack_name(tmp_path: Path) -> None:
    branchy = tmp_path / "branchy.py"
    branchy.write_text('def f(s):\n    if s.name == "dynamo":\n        return s.kserve\n', encoding="utf-8")
    assert _name_tests(branchy) == ["branchy.py:2", "branchy.py:3"]


def test_the_readme_templates_ask_no_stack_name_and_every_entry_has_one() -> None:
    k8s_templates = sorted((templates_dir() / "k8s").rglob("*.j2"))
    assert k8s_templates
    words = "|".join(re.escape(w) for w in sorted(WORDS))
    for path in k8s_templates:
        text = path.read_text(encoding="utf-8")
        assert not re.search(rf'==\s*"({words})"|\b(stack|entry)\.(kserve|pieces)\b', text), path
    assert all((templates_dir() / s.readme).is_file() for s in stacks.STACKS)
