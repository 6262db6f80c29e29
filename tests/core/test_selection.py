"""``select_ids``: the items named on the command line, in the order named; an unknown id
is one error line naming the source, never a silently shorter run."""

from dataclasses import dataclass

import pytest

from carebench.datasets.selection import select_ids
from carebench.types import CarebenchError


@dataclass
class Item:
    id: str
    n: int


ITEMS = [Item("a", 1), Item("b", 2), Item("c", 3)]


def test_keeps_the_named_items_in_the_order_named():
    assert [i.n for i in select_ids(ITEMS, ["c", "a"], "tasks.jsonl", "task")] == [3, 1]


def test_an_unknown_id_names_the_source_and_the_first_unknown_id():
    with pytest.raises(CarebenchError) as e:
        select_ids(ITEMS, ["a", "zz", "yy"], "personas.tsv", "persona")
    assert str(e.value) == "personas.tsv: no persona with id 'zz'"
