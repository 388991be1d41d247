"""One exception type for every failure a user can fix; the CLI prints its message on one line."""


class SuberDataError(Exception):
    """A failure with a message that names what went wrong and how to fix it."""


class SourceError(SuberDataError):
    """A source could not be fetched, verified or parsed."""


class ChecksumError(SourceError):
    """A downloaded file does not match its pinned checksum."""


class InputError(SuberDataError):
    """An input file has the wrong shape: names the file, the field and the fix."""
