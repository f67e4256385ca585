from zeroplan.cli.app import main

main()
