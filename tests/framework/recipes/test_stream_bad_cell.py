"""A typed stream whose bad cell lies past the records its types were inferred from: the
error names that file, record and column (it named record 0 of the first file, and a
transform as the fix)."""

from __future__ import annotations

from graphfit import cli

RECIPE = """\
seed: 0
data:
  source: stream
  files: {files}
  target: label
  inference_sample: 20
model: [{{type: Dense, units: 4, activation: relu}}, {{type: Dense, units: 1}}]
loss: {{type: BinaryCrossentropy, from_logits: true}}
training: {{epochs: 1, batch_size: 8, validation_split: 0, test_split: 0}}
"""


def test_a_bad_cell_past_the_inference_sample_is_named_by_file_record_and_column(
        tmp_path, capsys):
    for part in range(3):
        rows = [f"{'FR' if i % 2 else 'DE'},{(part * 30 + i) % 4},{i % 2}" for i in range(30)]
        if part == 2:
            rows[12] = "FR,two,1"
        (tmp_path / f"part{part}.csv").write_text("country,calls,label\n" + "\n".join(rows)
                                                  + "\n")
    recipe = tmp_path / "stream.yaml"
    recipe.write_text(RECIPE.format(files=str(tmp_path / "part*.csv")))
    assert cli.main(["validate", str(recipe)]) == 2
    err = capsys.readouterr().err
    assert "part2.csv, record 12 (counting from 0; line 14 of the file): column 'calls' holds " \
           "'two', which is not a valid float" in err, err
    assert "give the Stream a transform" not in err
