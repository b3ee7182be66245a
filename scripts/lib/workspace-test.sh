# Sourced by the scripts that run one integration test after scripts/test.sh's `cargo test
# --workspace` (not run). `cargo test -p CRATE` or `cargo test --test NAME` resolves features for
# fewer packages than the workspace does, so in a clean clone it rebuilds half the dependency graph
# (tokio, ring…) a second time with other features: a minute or more of the suite's time per
# feature set. Running the executable the workspace build already made avoids that.
#
# workspace_executable KIND NAME: builds the workspace's tests as `cargo test --workspace` does
# (nothing, after that run) and prints the package folder and the executable of its target NAME
# of KIND (test, example), separated by a tab.
workspace_executable() {
  cargo test --workspace --quiet --no-run --message-format=json | python3 -c '
import json, os, sys
kind, name = sys.argv[1], sys.argv[2]
hits = set()
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") \
            and m["target"]["name"] == name and kind in m["target"]["kind"]:
        hits.add((os.path.dirname(m["manifest_path"]), m["executable"]))
if len(hits) != 1:
    sys.exit("expected one %s target named %s in the workspace, found %d" % (kind, name, len(hits)))
print(*hits.pop(), sep="\t")
' "$1" "$2"
}

# workspace_test NAME [libtest args…]: runs the integration test NAME from its package's folder,
# where cargo would have run it.
workspace_test() {
  local name=$1
  shift
  local found dir exe
  found=$(workspace_executable test "$name")
  IFS=$'\t' read -r dir exe <<<"$found"
  (cd "$dir" && "$exe" "$@")
}
