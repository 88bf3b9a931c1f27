"""Griffe extension for the API reference: graphfit's docstrings head their doctests
`Example:` (singular), which Griffe's Google parser reads as an admonition of Markdown text;
renamed `Examples:`, they become an examples section whose `>>>` lines render as code."""

import re

import griffe

_HEADER = re.compile(r"^(\s*)Example:\s*$", re.M)


class ExampleSections(griffe.Extension):
    def on_object(self, *, obj, **kwargs):
        docstring = obj.docstring
        if docstring is not None and "Example:" in docstring.value:
            docstring.value = _HEADER.sub(r"\1Examples:", docstring.value)
