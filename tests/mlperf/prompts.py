"""A PromptSource of numbered prompts for the harness, SUT and probe tests that need token ids but no dataset."""

from __future__ import annotations


class Prompts:
    """A PromptSource of `count` prompts; prompt i starts with i."""

    def __init__(self, count: int) -> None:
        self.count = count

    def __len__(self) -> int:
        return self.count

    def prompt_ids(self, i: int) -> list[int]:
        return [i, 11, 12]
