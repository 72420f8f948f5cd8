#!/usr/bin/env bash
# Run the minimal-sft README's commands, in order, in a throwaway project.
#
# The project and its store live in a new temporary folder (MACHINE_DATA_DIR
# points inside it): nothing touches ~/.machine. Without --yes-spend the script
# stops before the first command that calls the Tinker API, which is billed.
#
#   bash examples/minimal-sft/run_example.sh              # offline steps only
#   bash examples/minimal-sft/run_example.sh --yes-spend  # the whole loop
set -euo pipefail

spend=no
case "${1:-}" in
  "") ;;
  --yes-spend) spend=yes ;;
  *)
    echo "usage: run_example.sh [--yes-spend]" >&2
    exit 2
    ;;
esac

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/machine-minimal-sft.XXXXXX")
export MACHINE_DATA_DIR="$work/data"
mkdir "$work/project"
cd "$work/project"
git init -q .
cp "$here/corpus.jsonl" .
echo "throwaway project: $work/project (store under $MACHINE_DATA_DIR)" >&2

# Echo each command before it runs, as the README writes it.
step() {
  echo "+ $*" >&2
  "$@"
}

step machine validate corpus.jsonl
step machine import corpus.jsonl
step machine train validate
step machine train eval init --size 12
step machine train sft --batch-size 4 --epochs 3

if [ "$spend" != yes ]; then
  echo "stopped before the first Tinker API call (billed): rerun with --yes-spend" >&2
  exit 0
fi

step machine train smoke --yes
step machine train eval baseline --yes
step machine train run --yes
RUN=$(machine runs --json | python3 -c 'import json, sys; print(json.load(sys.stdin)[-1]["id"])')
step machine train eval baseline --model "$RUN" --yes
echo "done: fill the README's table from the two eval lines above" >&2
