"""The workflow's steps, one function each (the Snakemake rules and the
``swgpu`` command call these):

=================  ===================================================  ===========================
step               does                                                 module
=================  ===================================================  ===========================
shard_db           database FASTA -> shard files + database.json        :mod:`.shard_db`
score_shard        queries x one shard -> that shard's top-k hits       :mod:`.score_shard`
merge_hits         all shards' hits -> hits.tsv (top-k, E-values)       :mod:`.merge_hits`
traceback          hits.tsv -> alignments (TSV, SAM, Parquet, text)     :mod:`.traceback`
check_shards       verify shard files, move corrupt ones aside          :mod:`.shard_db`
receipt            a database file's receipt (written by shard_db)      :mod:`.receipt`
=================  ===================================================  ===========================

Every step reads and writes files only (atomically), logs through
:mod:`logging`, and writes its statistics as JSON (:mod:`swgpu_tools.io.stepstats`).
"""
