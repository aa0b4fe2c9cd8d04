"""Language models: the provider protocol, the local llama.cpp worker, the model catalog."""
