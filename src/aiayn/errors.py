"""The one base class of aiayn's expected failures.

Bad input, a damaged file, a full disk or an impossible setting raise a subclass of `AiaynError`
whose message says what and where (the file, the line, the option). The command line prints that
message on one line and exits with status 2; anything else is a bug.
"""


class AiaynError(Exception):
    """An expected failure; the message names the file, line or option at fault."""
