"""The bench's BERT-base rows (pyrite/bench/bert.py), in their quick form (2 layers, batch 1):
the eager forward and the same forward under pr.compile, which the bench checks against the
eager output before timing it."""

import pyrite.bench.bert as bert
from pyrite.bench import Report


def test_bert_rows_eager_and_compiled(monkeypatch):
    monkeypatch.setattr(bert, "_time", lambda fn, sync, n, warmup=3: (fn(), sync(), 0.001)[2])
    rep = Report()
    bert.bench_bert(rep, quick=True)
    names = [r["name"] for r in rep.rows]
    assert names == [
        "BERT-base encoder fwd, 1x128 tokens (2 layers)",
        "the same under pr.compile, 1x128 tokens",
    ]
    assert all(r["value"] > 0 and r["unit"] == "ms" for r in rep.rows)
    assert "kernels a call" in rep.rows[1]["note"]
