from toolrun.launch import main

main()
