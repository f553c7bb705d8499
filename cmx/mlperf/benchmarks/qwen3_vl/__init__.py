"""qwen3-vl-235b-a22b: Shopify's product catalogue (a product's title, description and image) answered by
Qwen3-VL-235B-A22B-Instruct as a JSON object, scored by the category's hierarchical F1 (multimodal/qwen3-vl in
mlcommons/inference). Being built (issue 23): so far its scorer (accuracy.py), its request (prompts.py), its dataset
(dataset.py) and a tiny catalogue in the real format (tiny.py).
The package defines no `BENCHMARK` yet, so the kit does not list it and no app runs it.
"""
