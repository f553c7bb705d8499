"""A scorer that runs in an environment of its own, as the harness config records it: its interpreter and the
networks it loads. VBench (wan-2.2-t2v-a14b) is the one: it pins transformers 4.33.2 and numpy below 2, which the
engine's environment cannot share (recipes get-vbench-env and get-vbench-networks make the two)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class ExternalScorer:
    """`python`: the scorer environment's interpreter; `models`: the folder of the networks it loads; `gpus`: 0 to
    run it as one process on the CPU, N for torch.distributed.run over N GPUs (the reference's --num-gpus);
    `pythonpath`: folders put before the environment's own packages (on a CPU, torchvision without its compiled
    ops); `env`: more variables the scorer's process gets (recorded, so never a credential)."""

    python: Path
    models: Path
    gpus: int = 0
    pythonpath: tuple[Path, ...] = ()
    env: tuple[tuple[str, str], ...] = field(default=())

    def __post_init__(self) -> None:
        if self.gpus < 0:
            raise ValueError(f"gpus must be 0 (the CPU) or more, not {self.gpus}")

    def to_json(self) -> dict[str, Any]:
        return {"python": str(self.python), "models": str(self.models), "gpus": self.gpus,
                "pythonpath": [str(p) for p in self.pythonpath], "env": [list(kv) for kv in self.env]}

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> ExternalScorer | None:
        if not data:
            return None
        return cls(Path(data["python"]), Path(data["models"]), int(data.get("gpus", 0)),
                   tuple(Path(p) for p in data.get("pythonpath", ())),
                   tuple((str(k), str(v)) for k, v in data.get("env", ())))
