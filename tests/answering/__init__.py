"""Answer models: the extractive default, OpenAI-compatible and llama.cpp providers, and what a
model is given."""
