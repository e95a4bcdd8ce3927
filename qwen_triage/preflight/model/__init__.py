"""What the model is: config, tokenizer, safetensors and GGUF files checked without loading the weights."""
