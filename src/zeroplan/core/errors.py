"""zeroplan's one error hierarchy. The CLI's entry point turns every ZeroplanError into one stderr line and
its exit status: 2 for bad input (InputError), 1 for a run or check that failed (RunFailed)."""


class ZeroplanError(Exception):
    """An error zeroplan reports as one line; exit_code is the process's exit status."""

    exit_code = 1


class InputError(ZeroplanError, ValueError):
    """A user-supplied value is invalid. The message names the input and how to fix it."""

    exit_code = 2

    def __init__(self, input_name: str, problem: str, fix: str = "") -> None:
        self.input_name = input_name
        self.problem = problem
        self.fix = fix
        message = f"{input_name}: {problem}"
        if fix:
            message += f" ({fix})"
        super().__init__(message)


class RunFailed(ZeroplanError, RuntimeError):
    """The inputs were fine but the outcome is a failure the user asked to be told of: a check found errors,
    nothing fits to export, a rank died, a prediction missed its tolerance. Exit status 1 unless given."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code
