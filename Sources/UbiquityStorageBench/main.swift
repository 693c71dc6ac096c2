print("bench: TODO")
