from qwen_triage.cli.main import main

main()
