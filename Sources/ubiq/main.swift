print("ubiq: not built yet")
