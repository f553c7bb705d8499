"""whisper: LibriSpeech dev-clean and dev-other repacked into clips of up to 30 s, openai/whisper-large-v3, word
error rate (speech2text in mlcommons/inference).

The modules so far: transcript (the 42 labels the answer to LoadGen is made of), wer (the evaluator's word
errors, concatenations counted as matches), normalizer (openai-whisper's English text normaliser) and accuracy
(the evaluator, and the accuracy.txt it prints). The benchmark's BENCHMARK (dataset, model, tiny generators,
recipes) is not defined yet, so `cmx run` does not list it.
"""
