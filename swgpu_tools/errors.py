"""Errors raised for bad user input.

Every problem a user can fix (a missing file, a malformed FASTA record, an
unknown matrix, a bad config value) is raised as :class:`InputError` with a
message that names the file, the record and the position.  The command-line
front end prints the message and exits with status 2, never a traceback.
"""


class InputError(Exception):
    """A problem with user input; the message says what and where."""
