from tinytitan.cli.app import main

main()
