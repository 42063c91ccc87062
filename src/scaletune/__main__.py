from scaletune.cli import main

main()
