"""`python -m tools NAME [ARGS ...]`: runs one tool's `main(ARGS)`; without NAME, lists the tools.

A tool is a module of this package with a top-level `main(argv)`; the list reads each module's
source (no import, so listing costs nothing) and shows its docstring's first sentence.
"""
from __future__ import annotations

import ast
import importlib
import os
import sys
from typing import Dict, List, Optional

_HERE = os.path.dirname(os.path.abspath(__file__))
# Tools that are packages of several modules: the subcommand runs this module's main.
_PACKAGE_COMMANDS = {"reverb_diff": "reverb_diff.run"}


def _summary(path: str) -> Optional[str]:
    """The first docstring line of a module that defines a top-level `main`, else None."""
    with open(path, encoding="utf-8") as f:
        module = ast.parse(f.read(), path)
    if not any(isinstance(node, ast.FunctionDef) and node.name == "main" for node in module.body):
        return None
    paragraph = " ".join((ast.get_docstring(module) or "").strip().split("\n\n")[0].split())
    sentence = paragraph.split(". ")[0].rstrip(".")
    return sentence if len(sentence) <= 90 else sentence[:87].rsplit(" ", 1)[0] + " ..."


def commands() -> Dict[str, str]:
    """Subcommand name -> its tool's docstring's first sentence, sorted by name."""
    found = {}
    for entry in sorted(os.listdir(_HERE)):
        name, ext = os.path.splitext(entry)
        if ext == ".py" and not name.startswith("_"):
            summary = _summary(os.path.join(_HERE, entry))
            if summary is not None:
                found[name] = summary
    for name, module in _PACKAGE_COMMANDS.items():
        found[name] = _summary(os.path.join(_HERE, *module.split(".")) + ".py") or ""
    return dict(sorted(found.items()))


def main(argv: Optional[List[str]] = None) -> int:
    """Runs the tool named by argv[0] with the rest of argv; returns its exit status.

    Exit status 2 (with the list of tools on stderr) for an unknown or missing name.
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    available = commands()
    if not argv or argv[0] in ("-h", "--help"):
        out = sys.stdout if argv else sys.stderr
        print("usage: python -m tools NAME [ARGS ...]   (python -m tools NAME --help for a tool's options)\n",
              file=out)
        width = max(map(len, available))
        for name, summary in available.items():
            print(f"  {name:<{width}}  {summary}", file=out)
        return 0 if argv else 2
    name, rest = argv[0], argv[1:]
    if name not in available:
        print(f"python -m tools: unknown tool {name!r}; one of: {', '.join(available)}", file=sys.stderr)
        return 2
    module = importlib.import_module("tools." + _PACKAGE_COMMANDS.get(name, name))
    saved, sys.argv = sys.argv, [f"python -m tools {name}"] + rest  # argparse's usage names the subcommand
    try:
        status = module.main(rest)
    finally:
        sys.argv = saved
    return status if isinstance(status, int) else 0


if __name__ == "__main__":
    sys.exit(main())
