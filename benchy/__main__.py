from benchy.cli import main

main()
