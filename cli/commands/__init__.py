"""Subcommand registry: name -> (module, attribute, one-line help). One module per subcommand,
imported only when that subcommand runs; `graphscope --help` reads the help from here (a test
keeps each line equal to the first sentence of the command's docstring, short enough for one
line of the list at 80 columns)."""

COMMANDS = {
    "annotate": ("graphscope.cli.commands.annotate", "annotate",
                 "Capture MODEL for its annotation map only: no replays."),
    "annotate-trace": ("graphscope.cli.commands.annotate_trace", "annotate_trace",
                       "Add graphscope's tags to a torch.profiler trace."),
    "capture": ("graphscope.cli.commands.capture", "capture",
                "Capture MODEL's CUDA graphs, time them, write a bundle."),
    "check": ("graphscope.cli.commands.check", "check",
              "Check a model file or a recorded bundle against budgets."),
    "diff": ("graphscope.cli.commands.diff", "diff",
             "Compare bundle B with bundle A, graph by graph."),
    "doctor": ("graphscope.cli.commands.doctor", "doctor",
               "Say what works on this machine, and why not."),
    "dump": ("graphscope.cli.commands.dump", "dump",
             "Write BUNDLE as DOT, a trace or an annotation map."),
    "lint": ("graphscope.cli.commands.lint", "lint",
             "Find what would break MODEL's capture, on a CPU."),
    "report": ("graphscope.cli.commands.report", "report",
               "Print BUNDLE's tables, diagnosis and what to do next."),
    "run": ("graphscope.cli.commands.run", "run",
            "Profile the CUDA graphs an unmodified program captures."),
}
