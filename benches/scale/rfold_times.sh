#!/bin/sh
# Writes the Philly RFold job list repeated K times to standard output, for
# the scale measurements of benches/README.md ("Scale").
#
#   benches/scale/rfold_times.sh K [rfold_philly_jobs.csv] > rfold_xK.csv
#
# Copy k (0-based) of a row gets job id  k * 111549 + id  and arrival time
# arrival + k * 11176512 s (one second after the list's last arrival), so the
# copies follow one another in time and ids stay unique. K = 10 gives
# 1,115,490 rows; K = 90 gives 10,039,410 rows (about 361 MB).
set -eu
K=${1:?usage: rfold_times.sh K [rfold_philly_jobs.csv]}
SRC=${2:-"$(dirname "$0")/../../../shared/traces/philly/rfold_philly_jobs.csv"}
[ -r "$SRC" ] || { echo "rfold_times.sh: cannot read $SRC" >&2; exit 2; }
awk -F, -v K="$K" '
  NR == 1 { header = $0; next }
  { n++; id[n] = $1; t[n] = $2; rest[n] = $3 "," $4 "," $5 "," $6 }
  END {
    print header
    for (k = 0; k < K; k++)
      for (i = 1; i <= n; i++)
        printf "%d,%.1f,%s\n", k * n + id[i], t[i] + k * 11176512, rest[i]
  }' "$SRC"
