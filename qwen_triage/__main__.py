from qwen_triage.cli import main

main()
