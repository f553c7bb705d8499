"""WAN-2.2 text-to-video (wan-2.2-t2v-a14b): a diffusers WanPipeline run in process, each video an mp4 (issue #39).

Not a registered benchmark yet (no BENCHMARK here): its tiny pipeline (`tiny`) is what the diffusion engine
(cmx.mlperf.engines.diffusion) is tested on, ahead of the package's prompts, model recipe and scorer.
"""
