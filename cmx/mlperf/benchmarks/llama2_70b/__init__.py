"""llama2-70b: the OpenOrca dataset, the Llama 2 model folder, ROUGE accuracy and the _tiny generator."""
