"""The one exception type for bad user input; the CLI turns it into a single stderr line."""


class InputError(ValueError):
    """A user-supplied value is invalid. The message names the input and how to fix it."""

    def __init__(self, input_name: str, problem: str, fix: str = "") -> None:
        self.input_name = input_name
        self.problem = problem
        self.fix = fix
        message = f"{input_name}: {problem}"
        if fix:
            message += f" ({fix})"
        super().__init__(message)
