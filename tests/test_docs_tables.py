"""The docs' budget tables are the configs' own: each page's table is what tests/docs_tables.py renders from the
config it restates now, so a config changed without its page fails here."""

import pytest

from tests.docs_tables import TABLES, WRITE, in_page


@pytest.mark.parametrize("name", sorted(TABLES))
def test_each_budget_table_is_the_one_its_config_renders(name):
    page, render = TABLES[name]
    shown = in_page(name)
    assert shown is not None, f"{page} has no '<!-- table: {name} ... -->' block"
    assert shown == render(), f"{page}'s {name} table differs from its config: run `{WRITE}`"


def test_a_changed_config_makes_its_page_stale_and_write_renders_it_back(tmp_path, monkeypatch):
    import tests.docs_tables as tables

    page = tmp_path / "docs" / "page.md"
    page.parent.mkdir()
    page.write_text("intro\n<!-- table: t (generated) -->\n| old |\n<!-- end table -->\nafter\n")
    monkeypatch.setattr(tables, "ROOT", tmp_path)
    monkeypatch.setitem(tables.TABLES, "t", ("docs/page.md", lambda: "| new |"))
    assert in_page("t") == "| old |"
    assert tables.write("t") and in_page("t") == "| new |" and not tables.write("t")
    assert page.read_text() == "intro\n<!-- table: t (generated) -->\n| new |\n<!-- end table -->\nafter\n"
