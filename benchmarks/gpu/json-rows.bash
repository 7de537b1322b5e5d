# Sourced by the GPU benchmark scripts (not itself one: gpu-run runs the *.sh files).
# tag_rows FIELDS: keeps the JSON rows (lines starting with "{") of a benchmark's output on
# standard input, each with FIELDS (e.g. '"round":2,"side":"A"') added before its closing brace.
tag_rows() {
  grep '^{' | sed "s/}\$/,$1}/"
}
