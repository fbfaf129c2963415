from clotho.cli import main

main()
