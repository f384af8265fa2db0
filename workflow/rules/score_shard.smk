# Score every query against the database's shards.  A job scores a run of
# consecutive shards in one process (config shards_per_job; auto spreads the
# shards over the GPUs of this machine, so one GPU's jobs start CUDA once); its
# name is its shards, "0002" or "0000-0003" (swgpu_tools/shardjobs.py).
#
# GPU binding (details in workflow/README.md): Snakemake never sets
# CUDA_VISIBLE_DEVICES.  A job planned on a GPU (common.smk: SCORE_GPUS)
# declares `resources: gpu=1`.  `gpu` is a local resource (Snakefile); its
# amount on this machine is the number of visible GPUs (common.smk) unless
# `--resources gpu=N` is given, so one scoring job runs per GPU; the slurm
# executor asks for one GPU per job (--gpus=1).
# Inside the job, `swgpu score-shard --device auto` takes an exclusive lock
# file on one free GPU id (under $SWGPU_LOCK_DIR or the temp dir) and holds it
# until it exits, waiting while every GPU is taken; with one visible GPU (a
# slurm job, a single-GPU workstation) it uses GPU 0.
#
# Re-scans: each job keeps its memory of the shard in results/state/shard-NNNN.npz
# (not a declared output, so Snakemake never deletes it): every subject's
# content hash and each query's best top_k + margin hits.  When the shard
# changes in a new release, the job scores only the new and changed sequences
# and reuses the rest (swgpu_tools/engine/increment.py); a query whose margin
# ran out, or whose sequence changed, is scored against the whole shard.  A job
# reads the state before it starts the GPU: a small delta is scored on the CPU
# (swgpu_tools/engine/increment.py: rescan_on_cpu), so the GPU is never started.
# In a local run the job's process writes the state just after Snakemake has its
# status (swgpu_tools/later.py): a state is written whole or not at all, and an
# older one only makes the next re-scan score more, as exactly.
#
# The job's inputs are its shards' receipts (results/shards/shard-NNNN.json, see
# shard_db.smk); the shard files are read by path.  Its statistics file is in
# turn the receipt of its hit table for rule finish.
#
# A corrupt or truncated shard: `swgpu score-shard` fails with a message naming
# it; `swgpu check-shards --quarantine` then moves the bad shard to
# results/shards/corrupt/, so the next run of the workflow finds an output of
# the shard_db checkpoint missing and rebuilds the shards (unchanged ones
# byte-identical, so only the rebuilt shard is scored again).


rule score_shard:
    input:
        receipts=shard_receipts,
        queries=QUERIES,
    output:
        hits="results/hits/shard-{shard}.npz",
        stats="results/stats/score_shard/shard-{shard}.json",
    log:
        "results/logs/score_shard/shard-{shard}.log",
    benchmark:
        "results/benchmarks/score_shard/shard-{shard}.tsv"
    threads: config["threads"]
    resources:
        gpu=SCORE_GPUS,
    params:
        scoring=scoring_options(),
        top_k=config["top_k"],
        backend=config["backend"],
        margin=config["margin"] if config.get("margin") is not None else config["top_k"],
        state=shard_states,
        quarantine=QUARANTINE_DIR,
        shards=job_shard_files,
    shell:
        "( swgpu score-shard {params.shards:q} --queries {input.queries:q}"
        " --out {output.hits:q} --stats {output.stats:q} --state {params.state}"
        " --margin {params.margin} {params.scoring} --top-k {params.top_k}"
        " --backend {params.backend} --threads {threads} --device auto"
        " || {{ swgpu check-shards --quarantine {params.quarantine:q} {params.shards:q}; exit 1; }}"
        " ) > {log:q} 2>&1"
