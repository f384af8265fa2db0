"""Errors a user can act on.

Every problem a user can fix is one of these, with a message that names the
file, the record and the position; the ``swgpu`` command prints the message
and exits with status 2, never a traceback.

* :class:`InputError`: bad input or options (a missing file, a malformed
  FASTA record, an unknown matrix, a bad config value).
* :class:`OutputError`: an output cannot be written (disk full, permission
  denied, read-only folder); names the file.
"""


class InputError(Exception):
    """A problem with user input; the message says what and where."""


class OutputError(InputError):
    """An output file cannot be written; the message names it and says why."""
