#!/usr/bin/env bash
# Regenerates every chart in experiments/figures/ from the shipped experiment
# files: runs each sweep into $RUNS/<name> with --resume (complete runs from an
# earlier call are kept: the sweep only rebuilds summary.csv from their
# summary.json and redraws the charts), then copies the charts the write-ups
# (experiments/*.md) show to experiments/figures/<name>.svg, with the .png twin
# when the build draws one.
#
# Run from the repository root, after `cargo build --release`:
#
#   experiments/figures/regenerate.sh                       # everything
#   ONLY="sharing-lab16 iawp" experiments/figures/regenerate.sh
#   RUNS=/tmp/runs THREADS=1 experiments/figures/regenerate.sh
#
# Environment: DLSCHED (the binary, default target/release/dlsched), RUNS
# (where the sweeps write, default runs/, which git ignores), THREADS (worker
# threads per sweep, default 2; results do not depend on it), ONLY (names of
# the groups below to do, default all). The experiments that read real traces
# (baselines, sharing-alibaba, fgd) need ../shared and are skipped with a printed
# reason when it is absent. Nothing outside $RUNS and experiments/figures/ is
# written.
set -euo pipefail

DLSCHED=${DLSCHED:-target/release/dlsched}
RUNS=${RUNS:-runs}
THREADS=${THREADS:-2}
ONLY=${ONLY:-}
FIG=experiments/figures

if [[ ! -f Cargo.toml || ! -d $FIG ]]; then
    echo "regenerate.sh: run from the repository root (no Cargo.toml or $FIG here)" >&2
    exit 2
fi
if [[ ! -x $DLSCHED ]]; then
    echo "regenerate.sh: $DLSCHED is not an executable; run cargo build --release or set DLSCHED" >&2
    exit 2
fi
mkdir -p "$RUNS"

# wanted GROUP: whether GROUP is selected by $ONLY.
wanted() { [[ -z $ONLY || " $ONLY " == *" $1 "* ]]; }

# shared_file GROUP PATH: true when PATH (a real trace under ../shared) exists,
# else prints why GROUP is skipped.
shared_file() {
    if [[ -e $2 ]]; then return 0; fi
    echo "== $1: skipped: it reads $2, and ../shared is absent or lacks it"
    return 1
}

# sweep NAME TOML: runs the experiment into $RUNS/NAME (kept runs are not
# rerun), its output in $RUNS/NAME.log, and prints the wall time.
sweep() {
    local name=$1 toml=$2 t0=$SECONDS
    echo "== $name: dlsched sweep $toml --out $RUNS/$name --resume"
    "$DLSCHED" sweep "$toml" --out "$RUNS/$name" --threads "$THREADS" --resume >"$RUNS/$name.log"
    echo "   $(tail -n 1 "$RUNS/$name.log")"
    echo "   wall time $((SECONDS - t0)) s"
}

# subset SRC DST KEY=VALUE...: writes DST, the experiment SRC with each KEY
# taken out of [sweep] and set to VALUE in [base] (a TOML value, e.g.
# ect='"predicted"'), for a chart of one slice of a sweep. Only for
# experiments without relative paths (DST lives under $RUNS).
subset() {
    local src=$1 dst=$2
    shift 2
    awk -v sets="$(printf '%s\n' "$@")" '
        BEGIN { n = split(sets, kv, "\n"); for (i = 1; i <= n; i++) { k = kv[i]; sub(/=.*/, "", k); fixed[k] = kv[i] } }
        /^\[/ { section = $0 }
        {
            key = $0; sub(/[ \t]*=.*/, "", key)
            if (section == "[sweep]" && key in fixed) next
            print
            if ($0 == "[base]") for (i = 1; i <= n; i++) { k = kv[i]; sub(/=.*/, "", k); v = kv[i]; sub(/^[^=]*=/, "", v); print k " = " v }
        }' "$src" >"$dst"
}

# chart FROM TO: copies FROM.svg (and FROM.png, when drawn) to $FIG/TO.*
chart() {
    cp "$1.svg" "$FIG/$2.svg"
    if [[ -f $1.png ]]; then
        cp "$1.png" "$FIG/$2.png"
    else
        echo "   note: no $1.png (this build draws SVG only)"
    fi
}

# run_id SWEEPDIR KEY=VALUE...: the run id of the row of SWEEPDIR/summary.csv
# with those values (exactly one row, or an error).
run_id() {
    local dir=$1
    shift
    awk -F, -v want="$(printf '%s\n' "$@")" '
        NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; n = split(want, w, "\n"); next }
        {
            ok = 1
            for (j = 1; j <= n; j++) { k = w[j]; sub(/=.*/, "", k); v = w[j]; sub(/^[^=]*=/, "", v); if (!(k in col) || $col[k] != v) ok = 0 }
            if (ok) { print $1; found++ }
        }
        END { if (found != 1) { print "run_id: " found + 0 " rows match" > "/dev/stderr"; exit 1 } }' "$dir/summary.csv"
}

if wanted baselines && shared_file baselines ../shared/fidelity/helios-philly/philly_window_jobs.csv; then
    sweep baselines experiments/baselines.toml
    for m in jct_mean_s queue_delay_mean_s finish_time_fairness_max jain_fairness_index; do
        chart "$RUNS/baselines/${m}_vs_vc_scale" "baselines-${m}_vs_vc_scale"
    done
fi

if wanted baselines-lab16; then
    sweep baselines-lab16 experiments/baselines-lab16.toml
    for m in jct_mean_s jct_p99_s finish_time_fairness_max jain_fairness_index; do
        chart "$RUNS/baselines-lab16/${m}_vs_load" "baselines-lab16-${m}_vs_load"
    done
fi

if wanted genie; then
    # genie.md: the paper's setting (strict, predicted ECT), and backfill with
    # predicted ECT, all policies; the two readings at predicted ECT.
    subset experiments/genie-density.toml "$RUNS/genie-density-strict.toml" backfill=false ect='"predicted"'
    subset experiments/genie-density.toml "$RUNS/genie-density-backfill.toml" backfill=true ect='"predicted"'
    subset experiments/genie-readings.toml "$RUNS/genie-readings-predicted.toml" ect='"predicted"'
    sweep genie-density-strict "$RUNS/genie-density-strict.toml"
    sweep genie-density-backfill "$RUNS/genie-density-backfill.toml"
    sweep genie-readings-predicted "$RUNS/genie-readings-predicted.toml"
    chart "$RUNS/genie-density-strict/qos_guarantee_rate_vs_jobs_per_hour" genie-density-qos
    chart "$RUNS/genie-density-strict/makespan_s_vs_jobs_per_hour" genie-density-makespan
    chart "$RUNS/genie-density-backfill/qos_guarantee_rate_vs_jobs_per_hour" genie-density-qos-backfill
    chart "$RUNS/genie-readings-predicted/qos_guarantee_rate_vs_jobs_per_hour" genie-readings-qos
fi

if wanted rifling-lab16; then
    sweep rifling-lab16 experiments/rifling-lab16.toml
    chart "$RUNS/rifling-lab16/makespan_s_vs_jobs_per_hour" rifling-lab16-makespan
    chart "$RUNS/rifling-lab16/normalized_rate_cluster_vs_jobs_per_hour" rifling-lab16-rate-cluster
fi

if wanted sharing-lab16; then
    sweep sharing-lab16 experiments/sharing-lab16.toml
    for m in queue_delay_mean_s gpu_utilization gpu_utilization_effective_mean completion_rate interference_slowdown_mean; do
        chart "$RUNS/sharing-lab16/${m}_vs_max_tenants" "sharing-lab16-$m"
    done
    chart "$RUNS/sharing-lab16/jct_cdf" sharing-lab16-jct-cdf
fi

if wanted sharing-alibaba && shared_file sharing-alibaba ../shared/traces/alibaba-pai-2023/openb_pod_list_default.csv; then
    sweep sharing-alibaba experiments/sharing-alibaba.toml
    for m in queue_delay_mean_s gpu_utilization gpu_allocation_mean fragmentation_mean completion_rate; do
        chart "$RUNS/sharing-alibaba/${m}_vs_nodes" "sharing-alibaba-$m"
    done
fi

if wanted sharing-genie; then
    sweep sharing-genie experiments/sharing-genie.toml
    for m in completion_rate gpu_utilization_effective_mean gpu_allocation_mean qos_guarantee_rate jct_mean_s gpu_memory_utilization_mean; do
        chart "$RUNS/sharing-genie/${m}_vs_jobs_per_hour" "sharing-genie-$m"
    done
    sweep sharing-genie-exclusive experiments/sharing-genie-exclusive.toml
    for m in qos_guarantee_rate jct_mean_s gpu_utilization; do
        chart "$RUNS/sharing-genie-exclusive/${m}_vs_jobs_per_hour" "sharing-genie-exclusive-$m"
    done
fi

if wanted iawp; then
    sweep iawp experiments/iawp.toml
    for m in jct_mean_s interference_slowdown_mean completion_rate; do
        chart "$RUNS/iawp/${m}_vs_policy_opt.theta_mem" "iawp-k80-$m"
    done
    sweep iawp-v100 experiments/iawp-v100.toml
    for m in jct_mean_s interference_slowdown_mean; do
        chart "$RUNS/iawp-v100/${m}_vs_policy_opt.theta_mem" "iawp-v100-$m"
    done
    sweep iawp-vs experiments/iawp-vs.toml
    chart "$RUNS/iawp-vs/jct_cdf" iawp-vs-jct-cdf
fi

if wanted ldwp; then
    sweep ldwp-frozen experiments/ldwp-frozen.toml
    chart "$RUNS/ldwp-frozen/throughput_steady_jobs_per_hour_vs_load" ldwp-frozen-throughput_steady_jobs_per_hour
    # ldwp.md "Learning curves": one online run.
    if [[ ! -f $RUNS/ldwp-one/manifest.json ]]; then
        echo "== ldwp-one: dlsched simulate --policy ldwp ... --out $RUNS/ldwp-one"
        t0=$SECONDS
        "$DLSCHED" simulate --policy ldwp --cluster ldwp-testbed --rate-model table --jobs 1500 \
            --max-job-gpus 4 --load 1.0 --seed 4 --out "$RUNS/ldwp-one" >"$RUNS/ldwp-one.log"
        echo "   wall time $((SECONDS - t0)) s"
    fi
    "$DLSCHED" plot "$RUNS/ldwp-one" >/dev/null
    chart "$RUNS/ldwp-one/learning_curve" ldwp-online-learning-curve
    sweep ldwp experiments/ldwp.toml
    for m in throughput_steady_jobs_per_hour gpu_utilization_steady gpu_utilization throughput_jobs_per_hour load_balance_degree jct_mean_s; do
        chart "$RUNS/ldwp/${m}_vs_load" "ldwp-$m"
    done
fi

if wanted fgd && shared_file fgd ../shared/traces/alibaba-pai-2023/openb_pod_list_default.csv; then
    # fgd.md: not a sweep; `dlsched fill` reruns all 1,020 runs (about 3.5 min of CPU).
    echo "== fgd: dlsched fill experiments/fgd.toml --out $RUNS/fgd"
    t0=$SECONDS
    "$DLSCHED" fill experiments/fgd.toml --out "$RUNS/fgd" >"$RUNS/fgd.log"
    echo "   wall time $((SECONDS - t0)) s"
    for w in default multigpu50 gpushare100 gpuspec33 cpu250; do
        chart "$RUNS/fgd/unalloc-openb_pod_list_$w" "fgd-$w"
    done
fi

echo "done: charts in $FIG (git status shows which changed)"
