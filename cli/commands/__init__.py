"""Subcommand registry: name -> (module, attribute). One module per subcommand."""

COMMANDS = {
    "annotate": ("graphscope.cli.commands.annotate", "annotate"),
    "annotate-trace": ("graphscope.cli.commands.annotate_trace", "annotate_trace"),
    "capture": ("graphscope.cli.commands.capture", "capture"),
    "check": ("graphscope.cli.commands.check", "check"),
    "diff": ("graphscope.cli.commands.diff", "diff"),
    "doctor": ("graphscope.cli.commands.doctor", "doctor"),
    "dump": ("graphscope.cli.commands.dump", "dump"),
    "lint": ("graphscope.cli.commands.lint", "lint"),
    "report": ("graphscope.cli.commands.report", "report"),
    "run": ("graphscope.cli.commands.run", "run"),
}
