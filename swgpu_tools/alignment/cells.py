"""How the alignment passes encode cells: "minus infinity", direction bits, operations.

Shared by the scalar passes, the lane engines and the traceback (all Numba
code reads these as compile-time constants).
"""

from __future__ import annotations

#: "Minus infinity" that cannot overflow int32 when decreased a little.
NEG = -(1 << 30)

# direction bits of one traceback cell (one byte)
#: H came from the diagonal (op M)
H_DIAG = 0
#: H came from E: a gap in the query (op D, subject residues)
H_FROM_E = 1
#: H came from F: a gap in the subject (op I, query residues)
H_FROM_F = 2
#: the two bits that say where H came from
H_MASK = 3
#: E at this cell extends E of the cell to the left (else it opens from H)
E_EXTEND = 4
#: F at this cell extends F of the cell above (else it opens from H)
F_EXTEND = 8

# operation bytes
OP_M = 77  # ord("M")
OP_I = 73  # ord("I")
OP_D = 68  # ord("D")
