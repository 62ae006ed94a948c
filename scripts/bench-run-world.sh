#!/usr/bin/env bash
# bench-run-world.sh BIN... : `apodex run --world` with 20 scripted steps
# (19 bash calls, one of which writes a file, then finish) on stored
# worlds of $SIZES workspace files (100 per directory), under each of
# $SANDBOXES, $ROUNDS rounds interleaved across the binaries given.
# Prints one line per binary, size and sandbox with the medians of:
#   first  process start → the first tool_result in the record
#   run    the whole process, start → exit
#   end    run_finished's time in the record → exit (the rollout's end:
#          Finish, summary, checkpoint)
#   rss    peak RSS (MB, /usr/bin/time)
# The worlds are built once under $WORK (default: a new temporary
# directory) by the first binary.
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 BIN..." >&2; exit 2; }
ROUNDS=${ROUNDS:-5}
SIZES=${SIZES:-"0 20000 100000"}
SANDBOXES=${SANDBOXES:-"bwrap native none"}
WORK=${WORK:-$(mktemp -d)}
mkdir -p "$WORK"
python3 - "$WORK/script.json" <<'PY'
import json, sys
calls = [{"calls": [{"name": "bash", "args": {"command": "true"}}]} for _ in range(18)]
calls.insert(9, {"calls": [{"name": "bash", "args": {"command": "echo changed > /workspace/changed.txt"}}]})
calls.append({"calls": [{"name": "finish", "args": {"summary": "done"}}]})
json.dump({"turns": calls}, open(sys.argv[1], "w"))
PY
declare -A ID
for n in $SIZES; do
  src=$WORK/src-$n
  if [ ! -d "$src" ]; then
    mkdir -p "$src/workspace"
    printf 'name: big%s\nfamily: code\nobjective: Look around.\n' "$n" > "$src/world.yaml"
    python3 - "$src/workspace" "$n" <<'PY'
import os, sys
root, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    d = os.path.join(root, "d%04d" % (i // 100))
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "f%06d.txt" % i), "w") as f:
        f.write("file %d\n" % i)
if n == 0:
    open(os.path.join(root, ".keep"), "w").close()
PY
  fi
  for b in "$@"; do
    id=$("$b" worlds build --home "$WORK/home-$(basename "$b")" "$src" | awk '{print $1}')
  done
  ID[$n]=$id
done
OUT=$WORK/samples.tsv
: > "$OUT"
for r in $(seq "$ROUNDS"); do
  for n in $SIZES; do
    for sb in $SANDBOXES; do
      for b in "$@"; do
        home=$WORK/home-$(basename "$b")
        start=$(date +%s.%N)
        /usr/bin/time -f %M -o "$WORK/rss" "$b" run --home "$home" --world "${ID[$n]}" --sandbox "$sb" \
          --provider scripted --script "$WORK/script.json" --quiet >/dev/null 2>"$WORK/err" || { cat "$WORK/err" >&2; exit 1; }
        end=$(date +%s.%N)
        run=$(ls -t "$home/runs" | head -1)
        python3 - "$home/runs/$run/events.jsonl" "$start" "$end" "$(cat "$WORK/rss")" "$(basename "$b")" "$n" "$sb" >> "$OUT" <<'PY'
import json, sys
from datetime import datetime
ev, start, end, rss, b, n, sb = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), *sys.argv[5:]
def t(e):
    s = e["time"].replace("Z", "+00:00")
    head, _, frac = s.partition(".")
    frac, tz = (frac[:-6], frac[-6:]) if frac else ("0", s[-6:])
    return datetime.fromisoformat(head + tz).timestamp() + float("0." + frac)
first = fin = None
for line in open(ev):
    e = json.loads(line)
    if first is None and e["type"] == "tool_result":
        first = t(e)
    if e["type"] == "run_finished":
        fin = t(e)
print(f"{b}\t{n}\t{sb}\t{first-start:.4f}\t{end-start:.4f}\t{end-fin:.4f}\t{rss/1024:.1f}")
PY
        rm -rf "$home/runs/$run"
      done
    done
  done
done
python3 - "$OUT" <<'PY'
import sys, statistics, collections
rows = collections.defaultdict(list)
for line in open(sys.argv[1]):
    b, n, sb, *v = line.split("\t")
    rows[(b, int(n), sb)].append([float(x) for x in v])
print("binary\tfiles\tsandbox\tfirst_s\trun_s\tend_s\trss_mb\t(medians of %d)" % len(next(iter(rows.values()))))
for (b, n, sb), vs in sorted(rows.items(), key=lambda kv: (kv[0][1], kv[0][2], kv[0][0])):
    med = [statistics.median(col) for col in zip(*vs)]
    print(f"{b}\t{n}\t{sb}\t{med[0]:.3f}\t{med[1]:.3f}\t{med[2]:.3f}\t{med[3]:.0f}")
PY
