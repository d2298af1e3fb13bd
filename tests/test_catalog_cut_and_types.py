"""The catalog's typed field renames (a review's 'name:type')."""
from __future__ import annotations

from diag.messages import _convert


def test_a_typed_rename_reads_the_number_at_the_start_of_the_text():
    assert _convert("2048 self.tree_cache.evictable_size()=0", "int", leading=True) == 2048
    assert _convert("26,  self.cur_batch.reqs=[Req(", "int", leading=True) == 26
    assert _convert("0.9.", "float", leading=True) == 0.9
    assert _convert("abc", "int", leading=True) is None
    assert _convert("2048 more", "int") is None          # an extracted typed field is read whole
