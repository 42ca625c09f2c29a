"""The user's documents hold their shape: a README short enough to read, with a table of contents
and the test command CI runs; every relative link in README.md and docs/ reaches a file and, where
it names one, a heading; every name their Python examples import exists; tuned examples keep
short headers (their histories live in docs/tuning.md)."""
import ast
import glob
import importlib
import os
import re

import pytest

ROOT = os.path.join(os.path.dirname(__file__), "..")
DOCUMENTS = ["README.md"] + sorted(os.path.relpath(p, ROOT)
                                   for p in glob.glob(os.path.join(ROOT, "docs", "*.md")))
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def read(path):
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        return f.read()


def prose(text):
    """The text outside fenced code blocks."""
    return re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)


def anchors(text):
    """GitHub's anchors for the headings of a markdown text."""
    found = set()
    for heading in re.findall(r"^#{1,6} (.+)$", prose(text), re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        found.add(slug)
    return found


def test_the_readme_is_short_and_has_a_table_of_contents():
    text = read("README.md")
    assert len(text.splitlines()) <= 500
    assert "## Contents" in text
    for section in ("Install", "Quickstart", "Train", "Watch in TensorBoard", "Export and serve",
                    "Run a replay server", "Run on a cluster", "Coming from Reverb",
                    "Coming from RLlib", "Benchmarks"):
        assert f"\n## {section}\n" in text, section


def test_the_quickstart_test_command_is_the_one_ci_runs():
    quickstart = read("README.md").split("## Quickstart", 1)[1]
    commands = re.search(r"```bash\n(.*?)```", quickstart, re.S).group(1)
    readme_steps = commands.splitlines()[1].split(" && ")[1:]
    ci_steps = [line.strip() for line in read(".ci/run").splitlines()
                if line.strip() and not line.startswith(("#", "set ", "cd ", "pip "))]
    assert readme_steps == ci_steps


@pytest.mark.parametrize("document", DOCUMENTS)
def test_relative_links_reach_a_file_and_heading(document):
    base = os.path.dirname(os.path.join(ROOT, document))
    for target in LINK.findall(prose(read(document))):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        file = os.path.normpath(os.path.join(base, path)) if path else os.path.join(ROOT, document)
        assert os.path.exists(file), f"{document}: {target} names no file"
        if anchor and file.endswith(".md"):
            with open(file, encoding="utf-8") as f:
                assert anchor in anchors(f.read()), f"{document}: {target} names no heading"


def imported_names(code):
    """(module, name or None) of every import statement in a code block; a block that is not
    valid Python as a whole (elisions) contributes its import lines."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        lines = [line for line in code.splitlines() if line.startswith(("import ", "from "))]
        tree = ast.parse("\n".join(lines))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from ((alias.name, None) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            yield from ((node.module, alias.name) for alias in node.names)


@pytest.mark.parametrize("document", DOCUMENTS)
def test_the_examples_import_names_that_exist(document):
    blocks = re.findall(r"```python\n(.*?)```", read(document), re.S)
    for module_name, name in {pair for block in blocks for pair in imported_names(block)}:
        if module_name.split(".")[0] not in ("tfrl", "replay"):
            continue
        module = importlib.import_module(module_name)
        if name is not None and not hasattr(module, name):
            importlib.import_module(f"{module_name}.{name}")  # a submodule


EXAMPLES = sorted(glob.glob(os.path.join(ROOT, "tfrl", "tuned_examples", "*.yaml"))
                  + glob.glob(os.path.join(ROOT, "examples", "**", "*.yaml"), recursive=True)
                  + glob.glob(os.path.join(ROOT, "examples", "**", "*.py"), recursive=True))


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: os.path.relpath(p, ROOT))
def test_an_example_keeps_at_most_ten_comment_lines(example):
    with open(example, encoding="utf-8") as f:
        comments = [line for line in f if line.lstrip().startswith("#")]
    assert len(comments) <= 10, (f"{os.path.relpath(example, ROOT)}: move the history to "
                                 "docs/tuning.md, the steps to docs/")


def test_the_readme_names_tools_and_examples_that_exist():
    text = read("README.md")
    paths = set(re.findall(r"\b((?:tools|examples|tfrl/tuned_examples)/[\w./-]+\w)", text))
    assert paths
    for path in paths:
        assert os.path.exists(os.path.join(ROOT, path)), path


def test_the_architectures_layers_are_the_import_contracts():
    contract = read(".importlinter").split("[importlinter:contract:tfrl-layers]", 1)[1]
    declared = [line.strip().split(" : ") for line in
                contract.split("layers =", 1)[1].split("\n[", 1)[0].strip().splitlines()]
    section = read("docs/architecture.md").split("## Layers", 1)[1].split("\n## ", 1)[0]
    documented = [re.findall(r"`(\w+)`", row.split("|")[2]) for row in section.splitlines()
                  if row.startswith("| ") and "`" in row]
    assert documented == declared
