"""The engines a SUT talks to, behind one Backend protocol: vLLM in this process, or an OpenAI-compatible endpoint."""
