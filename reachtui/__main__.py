from reachtui.cli import main

main()
