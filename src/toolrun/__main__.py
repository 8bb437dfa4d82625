from toolrun.cli import main

main()
