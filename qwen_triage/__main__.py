from qwen_triage.cli.entry import main

main()
