"""Set-ups of docs/benchmarks/llama2-70b-assets.md: a Hugging Face Hub on 127.0.0.1 and a weights folder of your own."""

from __future__ import annotations

import json

from tests.docs.console import Session
from tests.hf_server import TOKEN, HubSite, serve


def hub(session: Session) -> None:
    """meta-llama/Llama-2-70b-chat-hf on a local Hub (its `main` at the recipe's pinned commit), reached as a
    mirror through HF_ENDPOINT, with a token that may read it."""
    site = serve(HubSite(files={"config.json": b"{}"}, lfs=set()))
    session.env.update(HF_ENDPOINT=next(site).url, HF_TOKEN=TOKEN)
    session.cleanups.append(site.close)


def own_weights(session: Session) -> None:
    """/tmp/models/Llama-2-70b-chat-hf laid out as Meta's folder: config.json and a tokenizer (no weights are read)."""
    folder = session.root / "models" / "Llama-2-70b-chat-hf"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "torch_dtype": "float16",
                                                    "eos_token_id": 2, "num_hidden_layers": 80}))
    (folder / "tokenizer.model").write_bytes(b"\0")


SETUPS = {"hub": hub, "own-weights": own_weights}
