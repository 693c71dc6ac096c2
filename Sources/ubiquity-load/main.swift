print("ubiquity-load: not built yet")
