#!/usr/bin/env bash
# A fresh install from the public registry, measured: wall time, size of site-packages,
# how many packages, and whether any torch, CUDA (nvidia-*) or transformers package came in.
#
#   bash bench/install.sh                  # pip install -e .
#   bash bench/install.sh test             # pip install -e '.[test]'
#   bash bench/install.sh dev /tmp/clone   # another source tree
#
# Each run makes a new venv in a temporary folder with python3 and installs with
# `--isolated --no-cache-dir`: no pip configuration (no local wheel folders or mirrors)
# and no cache, so every wheel is downloaded from PyPI as on a machine that never saw
# one. The time includes the downloads, so it depends on the network; the size does not.
# The venv is deleted afterwards; its `pip freeze` is printed last.
set -euo pipefail

extra="${1:-}"
source_dir="$(cd "${2:-$(dirname "$0")/..}" && pwd)"
target="$source_dir"
[ -n "$extra" ] && target="$source_dir[$extra]"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
python3 -m venv "$work/venv"
pip="$work/venv/bin/pip"

start=$(date +%s.%N)
"$pip" install --isolated --no-cache-dir --disable-pip-version-check -q -e "$target" >"$work/log" 2>&1 \
  || { cat "$work/log"; exit 1; }
end=$(date +%s.%N)

site="$("$work/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
freeze="$("$pip" freeze --isolated --exclude-editable 2>/dev/null)"
heavy="$(grep -iE '^(torch|nvidia-|triton|transformers|sentence-transformers)' <<<"$freeze" || true)"

echo "install: pip install -e '.${extra:+[$extra]}' (python $("$work/venv/bin/python" -V 2>&1 | cut -d' ' -f2))"
printf 'wall time: %.0f s\n' "$(echo "$end - $start" | bc)"
echo "site-packages: $(du -sh "$site" | cut -f1)"
echo "packages: $(wc -l <<<"$freeze")"
echo "torch/nvidia/transformers: ${heavy:-none}"
echo "--- pip freeze"
echo "$freeze"
