"""Errors that end a command with exit code 2, each naming what is wrong and what was expected."""


class UsageError(ValueError):
    """Base of every error the CLI reports as exit code 2."""


class ConfigError(UsageError):
    """The configuration is missing, malformed or names unknown keys."""


class InputError(UsageError):
    """The input cannot be used at all (missing path, wrong kind of file)."""


class NoInputError(InputError):
    """A folder that holds no input file at all (a watch's landing folder before its run)."""


class SetupError(UsageError):
    """Something `scripts/setup.sh` should have put in place is missing."""


class ConcurrentJobError(UsageError):
    """Another job kept committing to the same table: this write gave up, nothing half-done."""


class EnvironmentProblem(UsageError):
    """The lakehouse's place cannot be used (read-only, full, corrupted, another schema)."""
