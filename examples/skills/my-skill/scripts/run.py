print("digest")
