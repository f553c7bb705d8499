"""The benchmarks cmx runs, one package each (llama2_70b, ...): names, dataset, generation, accuracy, the _tiny generator."""
