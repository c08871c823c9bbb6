#!/bin/sh
# The oracle of openenv.yaml (capabilities.oracle, form: script): the built-in `oracle` policy reads each task's
# private goal and plays it through the ordinary page actions; every task of the default catalog ends with
# r_strict 1.0 (`shopsimrl data stats` plays it on all of them). Usage: validation/oracle.sh [DATA] [OUT]
set -eu
DATA=${1:-${SHOPSIM_DATA:-data/default}}
OUT=${2:-runs/oracle}
exec shopsimrl eval --data "$DATA" --split test --policy oracle --out "$OUT"
