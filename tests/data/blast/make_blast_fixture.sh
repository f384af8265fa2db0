#!/usr/bin/env bash
# Regenerate the BLAST+ fixtures of tests/test_blast_fixture.py (deterministic).
#
# Needs NCBI BLAST+ (Debian 12: `apt-get install ncbi-blast+`, blastp 2.12.0+).
# Database: tests/data/oracle_db.fasta.gz (2,000 UniProt entries); queries:
# tests/data/oracle_queries.fasta (7 UniProt queries, 59-4,291 aa).
# blastp runs as swgpu scores: composition-based statistics and SEG off, one
# HSP per subject, every hit up to E = 1000, -parse_seqids ids.
#
#   blastp_BLOSUM62_11_1.tsv.gz      all 7 queries, every BLAST field swgpu has
#   blastp_BLOSUM62_11_1_dbsize.tsv.gz  the same with -dbsize 1000000000
#   blastp_matrices.tsv.gz           every (matrix, gap_open, gap_extend) BLAST
#                                    tabulates (swgpu_tools.stats.supported()),
#                                    the 3 shortest queries, 100 hits each
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
data="$here/.."
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
zcat "$data/oracle_db.fasta.gz" > "$tmp/db.fa"
makeblastdb -in "$tmp/db.fa" -dbtype prot -parse_seqids -out "$tmp/db" > /dev/null
blastp -version | head -1 > "$here/BLAST_VERSION"
fields="qseqid qacc sseqid sacc score bitscore evalue qlen slen length pident nident mismatch positive ppos gapopen gaps qstart qend sstart send qcovhsp stitle btop"
common=(-db "$tmp/db" -comp_based_stats 0 -seg no -evalue 1000 -max_hsps 1)
blastp -query "$data/oracle_queries.fasta" "${common[@]}" -gapopen 11 -gapextend 1 \
    -max_target_seqs 5000 -outfmt "6 $fields" | gzip -n > "$here/blastp_BLOSUM62_11_1.tsv.gz"
blastp -query "$data/oracle_queries.fasta" "${common[@]}" -gapopen 11 -gapextend 1 \
    -max_target_seqs 5000 -dbsize 1000000000 -outfmt "6 qacc sacc score bitscore evalue qlen slen" \
    | gzip -n > "$here/blastp_BLOSUM62_11_1_dbsize.tsv.gz"
awk '/^>/{n++} n<=3' "$data/oracle_queries.fasta" > "$tmp/q3.fa"
# the (matrix, gap_open, gap_extend) triples BLAST tabulates, as swgpu_tools.stats lists them
python3 -c "
import sys; sys.path.insert(0, '$here/../../..')
from swgpu_tools.stats import supported
for m, go, ge in supported(): print(m, go, ge)" > "$tmp/pairs.txt"
while read -r m go ge; do
  blastp -query "$tmp/q3.fa" "${common[@]}" -matrix "$m" -gapopen "$go" -gapextend "$ge" \
      -max_target_seqs 100 -outfmt "6 qacc sacc score bitscore evalue qlen slen" \
      | awk -v m="$m" -v go="$go" -v ge="$ge" 'BEGIN{OFS="\t"}{print m, go, ge, $0}'
done < "$tmp/pairs.txt" | gzip -n > "$here/blastp_matrices.tsv.gz"
