"""The instruction model's training side: corpus, SFT, preferences, reward model, RL with vLLM, evaluation."""
