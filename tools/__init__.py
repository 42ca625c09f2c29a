"""tfrl's tools: benchmarks, side-by-side comparisons with peers, soak tests and maintenance
scripts, one package with a subcommand per tool.

    python -m tools                      # the subcommands, one line each
    python -m tools NAME [ARGS ...]      # runs tools/NAME.py's main(ARGS)

Each tool also runs on its own (`python tools/NAME.py ...` or `python -m tools.NAME ...`).
Not installed with the project: run from a checkout's root. The tools share helpers by importing
each other as `tools.<module>`.
"""
