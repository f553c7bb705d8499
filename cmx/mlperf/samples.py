"""What the QSL reads of a benchmark and how a sample's answer goes to LoadGen: the sample and encoder types.

A benchmark (cmx.mlperf.benchmarks, its `prompt_source` and `response_encoder`) makes them and the harness
(cmx.mlperf.loadgen.sut's QSL and SUTs) reads them, so they live below both, and import neither: types only,
nothing heavy (numpy is named for the type checker alone).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, TypeAlias, runtime_checkable

from cmx.mlperf.backends.base import ChatPrompt, GenResult, Media, VideoPrompt

if TYPE_CHECKING:
    import numpy as np


@runtime_checkable
class PromptSource(Protocol):
    """What the QSL reads: sample i's prompt as token ids (cmx.mlperf.benchmarks.llama2_70b.dataset.OpenOrca is one)."""

    def __len__(self) -> int: ...

    def prompt_ids(self, i: int) -> list[int]: ...


class MediaSource(PromptSource, Protocol):
    """A PromptSource whose samples carry media besides their tokens (Whisper's clips)."""

    def media(self, i: int) -> tuple[Media, ...]: ...


class ChatSource(Protocol):
    """What the QSL reads for a benchmark whose samples are conversations (Qwen3-VL's messages, its image among
    them), not token ids: sample i's chat, built when LoadGen loads the sample, as the reference builds it."""

    def __len__(self) -> int: ...

    def chat(self, i: int) -> ChatPrompt: ...


class VideoSource(Protocol):
    """What the QSL reads for a text-to-video benchmark (Wan 2.2's prompts): sample i's prompt as text, with the file
    name its video is written under; the pipeline tokenizes the text with its own encoder's tokenizer."""

    def __len__(self) -> int: ...

    def video(self, i: int) -> VideoPrompt: ...


# the array LoadGen is handed for a sample's result (its n_tokens is the result's, whatever the array holds); a
# string, so that naming the type imports no numpy
ResponseEncoder: TypeAlias = "Callable[[GenResult], np.ndarray]"

__all__ = ["ChatSource", "MediaSource", "PromptSource", "ResponseEncoder", "VideoSource"]
