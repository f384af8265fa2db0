#!/usr/bin/env bash
# The cluster failure cases that are not in CI (too slow there), by hand:
#
#   .ci/slurm-cluster.sh start
#   tests/slurm/failure_cases.sh [WORKDIR [CASES]]   # default /tmp/swgpu-slurm-cases "1 2 3"; about 20 min on 2 cores
#   .ci/slurm-cluster.sh stop
#
# Run from the repository root with the environment swgpu is installed in
# (.venv/bin on PATH, or activated).  Scoring jobs here must run longer than
# a minute (SLURM's smallest time limit), so the data are bigger than in
# tests/slurm/test_slurm_cluster.py: the bundled database 20 times (60,000
# entries), the bundled queries 40 times (200).  Every case uses a copy of
# profiles/slurm with the test cluster's account, partitions and GPU type.
#
#   1. time limit: score_shard with runtime 1 (minute), 1 shard: the job ends
#      TIMEOUT, the retry too; snakemake exits 1 naming the rule.
#   2. the same with runtime "1 if attempt == 1 else 10": the retry finishes;
#      exit 0.
#   3. slurmd stopped for 60 s while two scoring jobs run (2 shards, about a
#      minute each): the node goes down (SlurmdTimeout 30 s), the running jobs
#      end NODE_FAIL and SLURM requeues them; they run again when slurmd is
#      back; exit 0, tables byte-identical to a local run.  (A job that ends
#      before the node is declared down just completes: slurmstepd reports to
#      slurmctld without slurmd.)
#
# Each case prints its outcome and the sacct lines of its run; the script
# exits 1 if an outcome is not the expected one.
set -uo pipefail

REPO=$(cd "$(dirname "$0")/../.." && pwd)
WORK=${1:-/tmp/swgpu-slurm-cases}
CASES=${2:-1 2 3}
CLUSTER=$REPO/.ci/slurm-cluster.sh
command -v swgpu >/dev/null || { echo "swgpu is not on PATH (activate the environment)" >&2; exit 2; }
scontrol ping >/dev/null 2>&1 || { echo "no SLURM controller answers: run .ci/slurm-cluster.sh start" >&2; exit 2; }
mkdir -p "$WORK"
cd "$WORK" || exit 2
failed=0

python3 - "$REPO" <<'EOF'
import gzip, sys, yaml
repo = sys.argv[1]
def records(path):
    opener = gzip.open if path.endswith(".gz") else open
    out = []
    for line in opener(path, "rt"):
        if line.startswith(">"):
            out.append([line[1:].split()[0].replace("|", "_"), []])
        elif line.strip():
            out[-1][1].append(line.strip())
    return [(n, "".join(s)) for n, s in out]
with open("database.fasta", "w") as fh:
    for c in range(20):
        for n, s in records(f"{repo}/swgpu_tools/data/example_database.fasta.gz"):
            fh.write(f">c{c}_{n}\n{s}\n")
with open("queries.fasta", "w") as fh:
    for c in range(40):
        for n, s in records(f"{repo}/swgpu_tools/data/example_queries.fasta"):
            fh.write(f">q{c}_{n}\n{s}\n")
profile = yaml.safe_load(open(f"{repo}/profiles/slurm/config.yaml"))
profile["default-resources"].update(slurm_account="swgpu", slurm_partition="cpu")
profile["set-resources"]["score_shard"].update(slurm_partition="gpu", gpu_model="fake")
profile["set-threads"]["score_shard"] = 1
profile["slurm-init-seconds-before-status-checks"] = 2
for name, runtime in (("profile-1min", 1), ("profile-grow", "1 if attempt == 1 else 10"),
                      ("profile", profile["set-resources"]["score_shard"]["runtime"])):
    p = yaml.safe_load(yaml.safe_dump(profile))
    p["set-resources"]["score_shard"]["runtime"] = runtime
    import os
    os.makedirs(name, exist_ok=True)
    yaml.safe_dump(p, open(f"{name}/config.yaml", "w"), sort_keys=False)
EOF

setup() {  # setup DIR SHARDS
    rm -rf "$1"
    mkdir -p "$1"
    printf 'database: %s\nqueries: %s\nmatrix: BLOSUM62\ngap_open: 11\ngap_extend: 1\ntop_k: 500\nmax_evalue: 10.0\nshards: %s\nbackend: auto\nthreads: 1\n' \
        "$WORK/database.fasta" "$WORK/queries.fasta" "$2" >"$1/config.yaml"
}

cluster_run() {  # cluster_run DIR PROFILE: snakemake through SLURM, output to DIR.log
    snakemake -s "$REPO/Snakefile" --directory "$1" --configfile "$1/config.yaml" \
        --profile "$WORK/$2" --config backend=auto >"$1.log" 2>&1
}

show_sacct() {  # show_sacct LOG
    local uuid
    uuid=$(grep -o "SLURM run ID: \S*" "$1" | head -1 | cut -d' ' -f4)
    sacct -X -D -P --name "$uuid" -o JobID,State,Timelimit,Elapsed,ReqTRES,Comment
}

outcome() {  # outcome NAME OK MESSAGE
    if [[ $2 == 1 ]]; then echo "== $1: as expected: $3"; else echo "== $1: NOT as expected: $3"; failed=1; fi
}

# 1. time limit, no escalation
if [[ " $CASES " == *" 1 "* ]]; then
setup timeout 1
t0=$SECONDS
cluster_run timeout profile-1min
rc=$?
n=$(grep -c "SLURM status is: 'TIMEOUT'" timeout.log)
outcome "time limit 1 min" "$([[ $rc == 1 && $n == 2 ]] && echo 1)" \
    "exit $rc, $n TIMEOUT errors, $((SECONDS - t0)) s; $(grep -m1 "SLURM status is: 'TIMEOUT'" timeout.log | sed 's/^ *//')"
grep -m1 "^Error in rule" timeout.log
show_sacct timeout.log
fi

# 2. time limit growing with the attempt
if [[ " $CASES " == *" 2 "* ]]; then
setup grow 1
t0=$SECONDS
cluster_run grow profile-grow
rc=$?
n=$(grep -c "SLURM status is: 'TIMEOUT'" grow.log)
outcome "runtime 1 if attempt == 1 else 10" "$([[ $rc == 0 && $n == 1 ]] && echo 1)" \
    "exit $rc, $n TIMEOUT error(s), $((SECONDS - t0)) s"
show_sacct grow.log
fi

# 3. slurmd down for 60 s during scoring, against a local run
if [[ " $CASES " == *" 3 "* ]]; then
setup outage 2
setup local 2
snakemake -s "$REPO/Snakefile" --directory local --configfile local/config.yaml --cores 2 >local.log 2>&1 ||
    { echo "local run failed: see $WORK/local.log"; failed=1; }
t0=$SECONDS
cluster_run outage profile &
sm=$!
until squeue -h -t RUNNING -o %k | grep -q rule_score_shard && ls outage/results/logs/score_shard/*.log >/dev/null 2>&1; do
    sleep 0.5
done
echo "$(date +%T) scoring runs: $(squeue -h -o '%i %T %k' | tr '\n' ';')"
"$CLUSTER" stop-slurmd
sleep 60
echo "$(date +%T) after 60 s: node $(sinfo -h -N -o '%t %E' | head -1); jobs $(squeue -h -o '%i %T %r' | tr '\n' ';')"
"$CLUSTER" start-slurmd
wait $sm
rc=$?
same=1
for t in hits alignments; do cmp -s "outage/results/$t.tsv" "local/results/$t.tsv" || same=0; done
nodefail=$(show_sacct outage.log | grep -c "|NODE_FAIL|")
outcome "slurmd down 60 s" "$([[ $rc == 0 && $same == 1 ]] && echo 1)" \
    "exit $rc, tables equal to the local run: $same, $nodefail NODE_FAIL record(s) in sacct -D, $((SECONDS - t0)) s"
show_sacct outage.log
fi
exit $failed
