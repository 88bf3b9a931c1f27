"""Files that are not UTF-8 are named with their line and the fix, wherever graphfit reads
text (a CSV source, a table, a text folder); a byte-order mark is no part of the data."""

import pytest

from graphfit import datasets, tabular
from graphfit.tabular import TableError

LATIN1 = "city,temperature\nBern,3.5\nZ\u00fcrich,4.0\n".encode("latin-1")
MESSAGE = r"is not UTF-8 text: line 3 holds the byte 0xfc.*save the file as UTF-8"


def test_a_csv_source_that_is_latin1_names_its_line(tmp_path):
    path = tmp_path / "cities.csv"
    path.write_bytes(LATIN1)
    with pytest.raises(ValueError, match="cities.csv " + MESSAGE):
        datasets.load_csv(path, features=["temperature"], target=None)


def test_a_table_that_is_latin1_names_its_line(tmp_path):
    path = tmp_path / "cities.csv"
    path.write_bytes(LATIN1)
    with pytest.raises(TableError, match="cities.csv " + MESSAGE):
        tabular.read_table(str(path))


def test_a_text_folder_names_the_file_that_is_not_utf8_and_drops_a_bom(tmp_path):
    for label in ("food", "sport"):
        (tmp_path / label).mkdir()
    (tmp_path / "food" / "bom.txt").write_bytes("\ufeffsalt and pepper".encode("utf-8"))
    (tmp_path / "sport" / "a.txt").write_text("ball game")
    table = tabular.read_text_folder(str(tmp_path))
    assert table.columns["text"][0] == "salt and pepper"
    (tmp_path / "sport" / "latin.txt").write_bytes("first\nsecond\ncaf\u00e9".encode("latin-1"))
    with pytest.raises(TableError, match=r"latin.txt is not UTF-8 text: line 3 holds the byte "
                                         r"0xe9"):
        tabular.read_text_folder(str(tmp_path))


def test_a_wrong_delimiter_is_named_with_the_setting_that_fixes_it(tmp_path):
    path = tmp_path / "semicolons.csv"
    path.write_text("age;income\n30;2.5\n40;3.5\n")
    with pytest.raises(ValueError, match=r"separate its fields with ';', not ',': set "
                                         r"data.delimiter: ';'"):
        datasets.load_csv(path, features=["age"], target="income")
    table = tabular.read_table(str(path))
    with pytest.raises(TableError, match=r"has no column 'age' .*set data.delimiter: ';'"):
        tabular.feature_columns(table, {"age": {"type": "numeric"}})
    x, y = datasets.load_csv(path, features=["age"], target="income", delimiter=";")
    assert x[:, 0].tolist() == [30.0, 40.0]


def test_a_number_written_with_an_underscore_is_not_read_as_one(tmp_path):
    path = tmp_path / "counts.csv"
    path.write_text("count,y\n1_000,1\n")
    with pytest.raises(ValueError, match=r"line 2 \(data row 1\), column 'count': cannot read "
                                         r"'1_000' as a number"):
        datasets.load_csv(path, target="y")
