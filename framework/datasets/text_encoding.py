"""What to say about a text file that is not UTF-8, or whose fields another character
separates.

graphfit reads CSV, JSON lines and text files as UTF-8 (a byte-order mark is dropped).
Python's own error ("'utf-8' codec can't decode byte 0xe9 in position 399") names neither
the file nor its line, which matters in a folder of hundreds of files; `not_utf8_message`
finds both by decoding the raw bytes again.

Example:

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "latin1.csv")
    >>> with open(path, "wb") as handle:
    ...     _ = handle.write("name,city\\nZoe,Z\\xfcrich\\n".encode("latin-1"))
    >>> message = not_utf8_message(path)
    >>> "latin1.csv is not UTF-8 text: line 2 holds the byte 0xfc" in message
    True
"""

from __future__ import annotations

import gzip

__all__ = ["not_utf8_message", "delimiter_hint"]


def not_utf8_message(path: str) -> str:
    """The file, the line and the byte that UTF-8 cannot decode, and the fix."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as handle:
        raw = handle.read()
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as error:
        line = raw[:error.start].count(b"\n") + 1
        byte = raw[error.start]
        return (f"{path} is not UTF-8 text: line {line} holds the byte 0x{byte:02x}, which "
                f"UTF-8 cannot read (the file is probably Latin-1 or Windows-1252). Open it "
                f"and save the file as UTF-8 (a spreadsheet's 'CSV UTF-8'), or convert it: "
                f"iconv -f cp1252 -t utf-8 IN > OUT")
    return f"{path} is not UTF-8 text; save the file as UTF-8"


def delimiter_hint(header: list[str], delimiter: str = ",") -> str:
    """" It seems to separate fields with ';': set data.delimiter: ';'." when the header
    read as one field holds another usual separator, else ""."""
    if len(header) != 1:
        return ""
    for other in (";", "\t", "|", ","):
        if other != delimiter and other in header[0]:
            shown = "\\t" if other == "\t" else other
            return (f" The file seems to separate its fields with {shown!r}, not "
                    f"{delimiter!r}: set data.delimiter: {shown!r} (delimiter={shown!r} in "
                    f"Python).")
    return ""
