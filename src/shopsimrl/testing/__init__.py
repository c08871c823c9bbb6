"""Stand-ins for what a CPU machine lacks, for tests, benchmarks and the CPU recipe checks: a locally built tiny
tokenizer (``tiny_hf``) and a generate function that samples a built-in policy's action as the chat template
renders it (``scripted``). Nothing in the training path imports this package; a GPU user never needs it."""
