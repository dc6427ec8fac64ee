"""Subcommand registry: name -> (module, attribute, one-line help). One module per subcommand,
imported only when that subcommand runs; `graphscope --help` reads the help from here (a test
keeps each line equal to the first sentence of the command's docstring)."""

COMMANDS = {
    "annotate": ("graphscope.cli.commands.annotate", "annotate",
                 "Capture MODEL with annotations and write the exec-node annotation map "
                 "(PyTorch's pickle and JSON) and the annotated graph; no replays."),
    "annotate-trace": ("graphscope.cli.commands.annotate_trace", "annotate_trace",
                       "Add annotation fields to the kernel/memcpy/memset events of TRACE, "
                       "keyed by their graph node id (or, for torch <= 2.11 traces, matched to "
                       "a bundle by kernel sequence)."),
    "capture": ("graphscope.cli.commands.capture", "capture",
                "Capture MODEL into CUDA graphs (its training step, its own \"step\", or with "
                "--mode forward one inference graph per input bucket), replay them under the "
                "CUPTI tracer and write a bundle."),
    "check": ("graphscope.cli.commands.check", "check",
              "Capture MODEL, replay it and check the budgets."),
    "diff": ("graphscope.cli.commands.diff", "diff",
             "Compare bundle B against bundle A graph by graph: replay span, critical path and "
             "GPU work with their noise, and what changed."),
    "doctor": ("graphscope.cli.commands.doctor", "doctor",
               "Probe the GPU, driver, CUPTI and the one-subscriber slot; say what works."),
    "dump": ("graphscope.cli.commands.dump", "dump",
             "Write BUNDLE as annotated DOT (default), raw DOT, a trace or an annotation map."),
    "lint": ("graphscope.cli.commands.lint", "lint",
             "Run what capturing MODEL would run (forward and backward, its own step, or "
             "forward of each input bucket) once on the CPU and report what breaks or "
             "silently corrupts CUDA-graph capture: host syncs, data-dependent shapes, "
             "tensor-valued control flow, CPU tensors made inside forward, and "
             "make_graphed_callables' restrictions."),
    "report": ("graphscope.cli.commands.report", "report",
               "Print the tables of BUNDLE (works on any machine, no GPU)."),
    "run": ("graphscope.cli.commands.run", "run",
            "Run TARGET (a script, or a module with -m) with ARGS in this process, as python "
            "would, and write a bundle of every CUDA graph it captures: each kernel, memcpy "
            "and memset node tagged with its module and phase (and, in the first "
            "--op-captures captures of each capture line, its aten op, shapes and source "
            "line), and replays timed."),
}
