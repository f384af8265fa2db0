"""Everything that touches files: FASTA input, shard files, tables and other
output formats, written atomically (:mod:`.atomic`)."""
