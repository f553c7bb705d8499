"""docs/scale-out.md's diagrams are the ones cmx draws from the manifests it renders today."""

from __future__ import annotations

import re

import pytest

from cmx.k8s.diagram import mermaid
from cmx.k8s.stack_options import StackOptions
from cmx.k8s.stacks import objects
from tests.conftest import REPO
from tests.k8s.conftest import make_spec

DOC = REPO / "docs" / "scale-out.md"
SECTIONS = {"### --stack vllm": StackOptions(), "### --stack llm-d, the KServe form": StackOptions(name="llm-d"),
            "### --stack llm-d --llm-d-form pieces": StackOptions(name="llm-d", llmd_form="pieces"),
            "### --stack dynamo": StackOptions(name="dynamo")}


@pytest.mark.parametrize("heading", list(SECTIONS))
def test_each_stacks_diagram_in_the_docs_is_the_one_its_manifests_draw(heading: str) -> None:
    text = DOC.read_text(encoding="utf-8")
    after = text[text.index(heading):]
    block = re.search(r"```mermaid\n(.*?)```", after, re.S)
    assert block is not None, f"no diagram under {heading}"
    assert block.group(1) == mermaid(objects(make_spec("cuda", stack=SECTIONS[heading])))
