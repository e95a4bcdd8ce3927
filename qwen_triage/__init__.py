"""qwen-triage: rule-based triage for failing LLM servers on multi-GPU machines."""

__version__ = "0.1.0"
