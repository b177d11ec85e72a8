{
  "targets": [
    {
      "target_name": "ksp_splice",
      "sources": ["native/splice.c"],
      "cflags": ["-O2", "-Wall", "-Wextra"],
      "conditions": [["OS!='linux'", {"type": "none"}]]
    },
    {
      "target_name": "ksp_cast",
      "sources": ["native/cast-escape.c"],
      "cflags": ["-O2", "-Wall", "-Wextra"]
    }
  ]
}
