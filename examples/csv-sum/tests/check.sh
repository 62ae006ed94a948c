#!/bin/sh
# The verifier sees /inputs, /workspace and /outputs read-only; the agent never sees /tests.
set -e
sum=$(cat /outputs/sum.txt)
grep -q -- "$sum" /outputs/report.md || { echo "report.md does not state the sum $sum"; exit 1; }
echo "report states $sum"
