"""The serving stacks are entries of one registry: every choice of --stack (and --llm-d-form) picks exactly one,
each entry renders one stack kind (cmx.mlperf.serving_stack.KINDS, the one list of the stacks' names and titles),
no k8s module asks which stack it is serving, and no module of cmx lists the stacks a second time."""

from __future__ import annotations

import ast
import re
from itertools import product
from pathlib import Path

import pytest

from cmx.k8s import stacks
from cmx.k8s.stack_options import StackOptions
from cmx.mlperf import serving_stack
from cmx.mlperf.serving_stack import FORMS, KINDS, STACK_NAMES
from cmx.templates import templates_dir
from tests.conftest import REPO
from tests.k8s.conftest import make_spec

K8S = Path(stacks.__file__).parent
WORDS = {"vllm", "llm-d", "dynamo", "kserve", "pieces"}


def test_every_stack_choice_picks_one_entry_and_every_entry_is_chosen() -> None:
    chosen = []
    for name, form in product(STACK_NAMES, FORMS):
        options = StackOptions(name=name, llmd_form=form)
        matching = [s for s in stacks.STACKS if s.name == name and s.form in ("", form)]
        assert len(matching) == 1, (name, form, matching)
        assert stacks.stack_for(options) is matching[0]
        chosen.append(matching[0])
    assert {id(s) for s in chosen} == {id(s) for s in stacks.STACKS}


def test_the_registry_holds_one_entry_per_stack_kind_and_the_choices_are_the_kinds_words() -> None:
    assert [s.kind for s in stacks.STACKS] == list(KINDS)
    assert STACK_NAMES == tuple(dict.fromkeys(k.name for k in KINDS)) == ("vllm", "llm-d", "dynamo")
    assert FORMS == tuple(k.form for k in KINDS if k.form) == ("kserve", "pieces")


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


def _second_lists(path: Path) -> list[str]:
    """Literal collections (a tuple, list or set, or a dict's keys) holding two or more stack or form names: the
    stacks listed again beside KINDS (an option's choices, a table of titles)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        elements = (node.elts if isinstance(node, ast.Tuple | ast.List | ast.Set)
                    else node.keys if isinstance(node, ast.Dict) else [])
        if len({e.value for e in elements if isinstance(e, ast.Constant) and isinstance(e.value, str)} & WORDS) > 1:
            found.append(f"{path.name}:{node.lineno}")
    return found


def test_no_k8s_module_branches_on_a_stack_name_nor_does_the_stack_record() -> None:
    scanned = [*sorted(K8S.glob("*.py")), Path(serving_stack.__file__)]
    assert {"stacks.py", "vllm_stack.py", "dynamo.py", "serving_stack.py"} <= {p.name for p in scanned}
    assert [hit for p in scanned for hit in _name_tests(p)] == []


def test_no_module_of_cmx_lists_the_stacks_a_second_time() -> None:
    modules = sorted((REPO / "cmx").rglob("*.py"))
    assert len(modules) > 200
    assert [hit for p in modules for hit in _second_lists(p)] == []


def test_the_name_scan_sees_a_branch_on_a_stack_name(tmp_path: Path) -> None:
    branchy = tmp_path / "branchy.py"
    branchy.write_text('def f(s):\n    if s.name == "dynamo":\n        return s.kserve\n', encoding="utf-8")
    assert _name_tests(branchy) == ["branchy.py:2", "branchy.py:3"]


def test_the_list_scan_sees_a_second_list_of_stacks_or_forms_but_not_one_name_among_other_words(tmp_path: Path) -> None:
    listy = tmp_path / "listy.py"
    listy.write_text('NAMES = ("vllm", "llm-d", "dynamo")\nTITLES = {"kserve": "KServe", "pieces": "pieces"}\n'
                     'ARGV = ["vllm", "serve", "model"]\nFORMS = ["kserve"]\n', encoding="utf-8")
    assert _second_lists(listy) == ["listy.py:1", "listy.py:2"]


def test_the_readme_templates_ask_no_stack_name_and_every_entry_has_one() -> None:
    k8s_templates = sorted((templates_dir() / "k8s").rglob("*.j2"))
    assert k8s_templates
    words = "|".join(re.escape(w) for w in sorted(WORDS))
    for path in k8s_templates:
        text = path.read_text(encoding="utf-8")
        assert not re.search(rf'==\s*"({words})"|\b(stack|entry)\.(kserve|pieces)\b', text), path
    assert all((templates_dir() / s.readme).is_file() for s in stacks.STACKS)
