#!/usr/bin/env bash
# The first call from a fresh install, both ways the README's install runs:
#   1. `pip install .` of this checkout into a new virtual environment;
#   2. a wheel built in another directory (`pip wheel`), installed into another new one.
# HOME, XDG_CACHE_HOME and NUMBA_CACHE_DIR are empty directories for every run, so
# nothing is loaded that the install did not put in the package. Prints the install
# times, then for each environment the import, the first binary report (10,000 float32
# rows), the first K-class report after it (benchmarks/first_call.py), a warm
# `fastcal score` of 1,000 CSV rows and `tracking compare --runs 10` (wall s, each run
# in a new process; the first of each in an empty cache).
#
#   bash benchmarks/first_call_fresh.sh [WORKDIR]
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
work="${1:-$(mktemp -d)}"
py="$(command -v python3.11 || command -v python3)"
mkdir -p "$work"

secs() { local t0=$SECONDS; "$@" >"$work/last.log" 2>&1 || { tail -5 "$work/last.log"; exit 1; }; echo $((SECONDS - t0)); }

echo "checkout: $(git -C "$repo" rev-parse --short HEAD); work: $work"
"$py" -m venv "$work/venv-a"
"$work/venv-a/bin/pip" -q install --upgrade pip >/dev/null
echo "install a (pip install .): $(secs "$work/venv-a/bin/pip" install -v "$repo") s"
grep -h "fastcal: " "$work/last.log" || true

"$py" -m venv "$work/venv-b"
"$work/venv-b/bin/pip" -q install --upgrade pip >/dev/null
mkdir -p "$work/wheels" "$work/elsewhere"
cp -r "$repo" "$work/elsewhere/src"
rm -rf "$work/elsewhere/src/.venv" "$work/elsewhere/src/fastcal/_kernels/_shipped" "$work/elsewhere/src/build"
echo "wheel built elsewhere: $(secs "$work/venv-b/bin/pip" wheel -v --no-deps -w "$work/wheels" "$work/elsewhere/src") s"
grep -h "fastcal: " "$work/last.log" || true
ls "$work/wheels"
rm -rf "$work/elsewhere"
echo "install b (that wheel): $(secs "$work/venv-b/bin/pip" install "$work"/wheels/fastcal-*.whl) s"

printf 'p,y\n' >"$work/scores.csv"
"$work/venv-a/bin/python" -c "
import numpy as np
rng = np.random.default_rng(0)
p = rng.random(1000)
y = rng.random(1000) < p
print('\n'.join(f'{a:.6f},{int(b)}' for a, b in zip(p, y)))" >>"$work/scores.csv"

for v in a b; do
    venv="$work/venv-$v"
    for run in fresh warm warm warm; do
        home="$work/home-$v"
        [ "$run" = fresh ] && rm -rf "$home"
        mkdir -p "$home"
        export HOME="$home" XDG_CACHE_HOME="$home/.cache" NUMBA_CACHE_DIR="$home/numba"
        (cd "$work" && echo "venv $v $run: import, binary, K-class: $("$venv/bin/python" "$repo/benchmarks/first_call.py" --classes)")
        t0=$(date +%s.%N); (cd "$work" && "$venv/bin/fastcal" score scores.csv --prob p --label y >/dev/null)
        t1=$(date +%s.%N); (cd "$work" && "$venv/bin/tracking" compare --runs 10 >/dev/null)
        t2=$(date +%s.%N)
        echo "venv $v $run: fastcal score $(echo "$t1 - $t0" | bc) s, tracking compare $(echo "$t2 - $t1" | bc) s"
    done
    echo "venv $v: files compiled into the cache: $(find "$work/home-$v" -name '*.nbi' | wc -l)"
done
