"""The docs site documents every command and option of the command line."""

from __future__ import annotations

import re
from pathlib import Path

import click

from audiotok.cli import main

DOCS = Path(__file__).resolve().parents[1] / "docs"


def test_every_command_and_option_is_in_the_cli_page():
    page = (DOCS / "cli.md").read_text()
    headings = re.findall(r"^## `audiotok (\w+)", page, re.M)
    common = page.split("\n## ", 1)[0]  # the options every model command shares
    missing = []
    for name, command in main.commands.items():
        if name not in headings:
            missing.append(f"command {name} (no '## `audiotok {name} ...`' heading)")
            continue
        section = page.split(f"## `audiotok {name}", 1)[1].split("\n## ", 1)[0]
        for param in command.params:
            if isinstance(param, click.Option) and not param.hidden and param.name != "help":
                longest = max(param.opts, key=len)
                if longest not in section and longest not in common:
                    missing.append(f"{name} {longest}")
    assert not missing, f"docs/cli.md does not document: {missing}"


def test_every_page_is_in_the_nav():
    nav = (DOCS.parent / "mkdocs.yml").read_text()
    pages = sorted(str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md"))
    assert pages and all(page in nav for page in pages), \
        [page for page in pages if page not in nav]
