"""folio.tables.table_grid on synthetic word boxes: rows, columns, multi-line and spanning cells."""

from __future__ import annotations

from folio.models import BBox, Block, WordBox
from folio.tables.table_grid import TableGrid, build_grid, grid_html

#: a 10pt font: word boxes 12pt tall, a character 5pt wide, a word space 3pt
CHAR_W, HEIGHT, SPACE = 5.0, 12.0, 3.0


def phrase(text: str, x: float, y: float) -> list[WordBox]:
    """The words of ``text`` set from ``x`` on the line whose top is ``y``."""
    out = []
    for word in text.split():
        out.append(WordBox(text=word, x0=x, y0=y, x1=x + CHAR_W * len(word), y1=y + HEIGHT))
        x += CHAR_W * len(word) + SPACE
    return out


def table(rows: list[list[str]], xs: list[float], top: float = 100.0,
          pitch: float = 16.0) -> list[WordBox]:
    """Words of a table: row ``r``'s cell ``c`` at ``xs[c]``; empty strings leave a slot."""
    words = []
    for r, row in enumerate(rows):
        for c, text in enumerate(row):
            words += phrase(text, xs[c], top + r * pitch)
    return words


def texts(grid: TableGrid) -> list[list[str]]:
    """The grid as rows of cell texts ("" for an empty slot)."""
    out = [["" for _ in range(grid.cols)] for _ in range(grid.rows)]
    for cell in grid.cells:
        out[cell.row][cell.col] = cell.text
    return out


def test_borderless_table_rows_and_columns() -> None:
    rows = [["Region", "Net sales", "Units"],
            ["North America", "1,204.5", "311"],
            ["Europe", "988.0", "207"],
            ["Asia Pacific", "45.2", "9"]]
    grid = build_grid(table(rows, [50, 160, 240]))
    assert grid is not None
    assert (grid.rows, grid.cols) == (4, 3)
    assert texts(grid) == rows


def test_words_out_of_order_still_make_the_grid() -> None:
    rows = [["Name", "Age"], ["Ann Lee", "31"], ["Bo", "7"]]
    words = table(rows, [50, 150])
    grid = build_grid(list(reversed(words)))
    assert grid is not None and texts(grid) == rows


def test_two_line_header_cell_is_one_cell() -> None:
    words = table([["Item", "Total", "Net"],
                   ["", "revenue", "income"],
                   ["Cars", "12", "3"],
                   ["Boats", "7", "1"]], [50, 150, 250], pitch=13.0)
    grid = build_grid(words)
    assert grid is not None
    assert texts(grid) == [["Item", "Total revenue", "Net income"],
                           ["Cars", "12", "3"], ["Boats", "7", "1"]]


def test_wrapped_row_label_joins_its_row() -> None:
    words = table([["Measure", "2023", "2024"],
                   ["Net income attributable", "10", "12"],
                   ["to shareholders", "", ""],
                   ["Dividends", "4", "5"]], [50, 180, 240], pitch=13.0)
    grid = build_grid(words)
    assert grid is not None
    assert texts(grid) == [["Measure", "2023", "2024"],
                           ["Net income attributable to shareholders", "10", "12"],
                           ["Dividends", "4", "5"]]


def test_rows_under_a_key_written_once_stay_rows() -> None:
    rows = [["Year", "Quarter", "Sales"], ["2020", "Q1", "5"], ["", "Q2", "6"],
            ["", "Q3", "8"]]
    grid = build_grid(table(rows, [50, 150, 250], pitch=13.0))
    assert grid is not None and texts(grid) == rows


def test_group_header_spans_the_columns_it_crosses() -> None:
    words = table([["", "Revenue by year"],
                   ["Segment", "2022", "2023"],
                   ["Retail", "10", "11"],
                   ["Online", "20", "22"]], [50, 150, 200])
    grid = build_grid(words)
    assert grid is not None and (grid.rows, grid.cols) == (4, 3)
    header = next(c for c in grid.cells if c.row == 0)
    assert (header.text, header.col, header.col_span) == ("Revenue by year", 1, 2)
    assert texts(grid)[2] == ["Retail", "10", "11"]
    html = grid_html(grid)
    assert '<th colspan="2">Revenue by year</th>' in html
    assert html.count("<tr>") == 4 and html.startswith("<table>")


def test_vertical_rulings_separate_columns_a_gap_would_miss() -> None:
    # the columns touch (no gap a word space wide); a ruling line between them tells
    rows = [["alpha", "beta"], ["gamma", "delta"], ["kappa", "sigma"]]
    words = table(rows, [50, 77])
    assert build_grid(words) is None
    frame = [BBox(x0=45, y0=95, x1=45.5, y1=150), BBox(x0=110, y0=95, x1=110.5, y1=150)]
    rule = BBox(x0=75.8, y0=95, x1=76.2, y1=150)
    assert build_grid(words, rulings=frame) is None  # the frame separates nothing
    grid = build_grid(words, rulings=[*frame, rule])
    assert grid is not None and texts(grid) == rows


def test_horizontal_ruling_keeps_a_lowercase_line_a_row_of_its_own() -> None:
    words = table([["Term", "Meaning"], ["cat", "a small feline"], ["dog", "a canine"],
                   ["", "loyal"]], [50, 150], pitch=13.0)
    merged = build_grid(words)
    assert merged is not None and texts(merged)[-1] == ["dog", "a canine loyal"]
    rule = BBox(x0=40, y0=100 + 3 * 13 - 0.8, x1=300, y1=100 + 3 * 13 - 0.4)
    ruled = build_grid(words, rulings=[rule])
    assert ruled is not None and texts(ruled)[-1] == ["", "loyal"]


def test_a_short_lowercase_key_is_a_row_not_a_wrapped_line() -> None:
    # "x" does not reach its column's edge: nothing wrapped, it is a row with no value
    rows = [["Variable", "Mean"], ["age in years", "41"], ["x", ""], ["weight", "70"]]
    grid = build_grid(table(rows, [50, 150], pitch=13.0))
    assert grid is not None and texts(grid) == rows


def test_prose_is_not_a_table() -> None:
    words = phrase("This is a sentence of prose that runs along one line", 50, 100)
    words += phrase("and carries on to the next line without any column gaps", 50, 114)
    assert build_grid(words) is None
    assert build_grid([]) is None


def test_html_escapes_text_and_fills_empty_slots() -> None:
    grid = build_grid(table([["A<B", "C&D"], ["x", ""], ["1", "2"]], [50, 150]))
    assert grid is not None
    html = grid_html(grid)
    assert "<th>A&lt;B</th><th>C&amp;D</th>" in html
    assert "<tr><td>x</td><td></td></tr>" in html


def test_right_to_left_table_reads_its_words_and_columns_from_the_right() -> None:
    # Hebrew: the first column is the rightmost, a phrase's first word its rightmost
    words = phrase("כמות", 250, 100) + phrase("מוצר", 100, 100)
    words += phrase("12", 250, 116) + [WordBox(text="שולחן", x0=125, y0=116, x1=150, y1=128),
                                      WordBox(text="עץ", x0=110, y0=116, x1=120, y1=128)]
    words += phrase("4", 250, 132) + phrase("כסא", 100, 132)
    grid = build_grid(words)
    assert grid is not None
    assert texts(grid) == [["כמות", "מוצר"], ["12", "שולחן עץ"], ["4", "כסא"]]


def test_a_mostly_empty_grid_is_no_table() -> None:
    # two lines across four columns, then ten lines of a lone label: 18 of 48 slots filled
    rows = [["Name", "Date", "Place", "Stamp"], ["Ann", "May", "Oslo", "None"]]
    rows += [[f"Label {n}", "", "", ""] for n in range(10)]
    assert build_grid(table(rows, [50, 150, 250, 350])) is None
    assert build_grid(table(rows[:4], [50, 150, 250, 350])) is not None  # 10 of 16


def test_blocks_written_before_grids_still_load() -> None:
    old = Block.model_validate({"label": "Table", "content": "a b", "order": 0})
    assert old.cells is None
    grid = build_grid(table([["A", "B"], ["1", "2"]], [50, 150]))
    assert grid is not None
    new = Block(label="Table", content=grid_html(grid), order=0, cells=grid.cells)
    assert Block.model_validate_json(new.model_dump_json()) == new


def test_a_cell_centred_beside_two_rows_spans_them() -> None:
    words = table([["Model", "Format", "Score"], ["", "OTSL", "0.96"], ["", "HTML", "0.95"],
                   ["Small", "OTSL", "0.91"]], [50, 150, 250], pitch=14.0)
    words += phrase("Large", 50, 100 + 1.5 * 14)  # centred on the OTSL and HTML rows
    grid = build_grid(words)
    assert grid is not None and grid.rows == 4
    large = next(c for c in grid.cells if c.text == "Large")
    assert (large.row, large.col, large.row_span) == (1, 0, 2)
    assert texts(grid)[2] == ["", "HTML", "0.95"]
    assert '<td rowspan="2">Large</td>' in grid_html(grid)
    assert "<tr><td>HTML</td><td>0.95</td></tr>" in grid_html(grid)


def test_a_cell_on_three_lines_stays_one_cell() -> None:
    words = table([["Term", "Meaning"], ["cat", "a small"], ["", "domestic"], ["", "feline"],
                   ["dog", "a canine"]], [50, 150], pitch=13.0)
    grid = build_grid(words)
    assert grid is not None
    assert texts(grid) == [["Term", "Meaning"], ["cat", "a small domestic feline"],
                           ["dog", "a canine"]]


def test_an_evenly_spaced_sparse_line_is_a_row_not_a_spanning_cell() -> None:
    rows = [["Key", "Value", "Note"], ["a", "1", ""], ["", "", "see below"], ["b", "2", ""]]
    grid = build_grid(table(rows, [50, 150, 250], pitch=14.0))
    assert grid is not None and texts(grid) == rows
    assert all(c.row_span == 1 for c in grid.cells)


def test_no_word_is_lost_when_a_centred_cell_meets_a_wrapped_one() -> None:
    # row "Large" has a wrapped label above the centred cell's line: both must survive
    words = table([["Model", "Format", "Score"], ["", "OTSL format", "0.96"],
                   ["", "two", ""], ["", "HTML", "0.95"]], [50, 150, 250], pitch=7.0)
    words += phrase("Large", 50, 100 + 1.5 * 7)
    grid = build_grid(words)
    assert grid is not None
    got = sorted(w for c in grid.cells for w in c.text.split())
    assert got == sorted(w.text for w in words)


def test_justified_prose_is_not_a_table() -> None:
    # a paragraph whose justified lines happen to leave one wide space: no table
    lines = ["For example assume that a business has assigned", "the duty to manage",
             "security and the", "data in the", "payroll table even though the job",
             "description was only to manage its security"]
    words: list[WordBox] = []
    for n, text in enumerate(lines):
        words += phrase(text, 50, 100 + 13 * n)
    words += phrase("wide", 200, 100 + 13) + phrase("gaps", 200, 100 + 26)
    assert build_grid(words) is None


def test_a_wider_second_line_does_not_cover_the_next_cell() -> None:
    words = table([["Item", "Note", "Code"], ["Lamp", "short", "A1"], ["Desk", "b", "B2"]],
                  [50, 150, 300], pitch=13.0)
    words += phrase("and a much longer wrapped second line", 150, 100 + 13 * 1.9)
    grid = build_grid(words)
    assert grid is not None
    html = grid_html(grid)
    assert "A1" in html and all(c.col + c.col_span <= grid.cols for c in grid.cells)
    row = sorted((c.col, c.col + c.col_span) for c in grid.cells if c.row == 1)
    assert all(a[1] <= b[0] for a, b in zip(row, row[1:], strict=False))


def test_a_summary_row_written_across_the_key_columns_keeps_them_apart() -> None:
    """"Average (all)" crosses the gap between "#" and "Topic", as does no other row:
    the gap still separates two columns, and the summary row spans them."""
    rows = [["#", "Topic", "Score", "Runs"]] + [
        [str(n), name, f"0.{n}5", str(10 * n)]
        for n, name in enumerate(["Soils", "Crops", "Bones", "Lime", "Dung", "Peat",
                                  "Marl"], 1)]
    words = table(rows, [50, 70, 200, 260])
    words += phrase("Average (all)", 50, 100 + 16 * len(rows)) + phrase(
        "0.45", 200, 100 + 16 * len(rows)) + phrase("40", 260, 100 + 16 * len(rows))
    grid = build_grid(words)
    assert grid is not None and grid.cols == 4
    assert texts(grid)[:-1] == rows
    last = [c for c in grid.cells if c.row == grid.rows - 1]
    assert [(c.text, c.col, c.col_span) for c in last] == [
        ("Average (all)", 0, 2), ("0.45", 2, 1), ("40", 3, 1)]
    assert grid.header_rows == 1 and "<th>Topic</th>" in grid_html(grid)


def test_a_table_set_sideways_makes_no_grid() -> None:
    """Words taller than wide (a scan read turned a right angle): rows would cross it."""
    rows = [["Region", "Net sales"], ["North America", "1,204.5"], ["Europe", "988.0"]]
    turned = [w.model_copy(update={"x0": w.y0, "x1": w.y1, "y0": w.x0, "y1": w.x1})
              for w in table(rows, [50, 160])]
    assert build_grid(turned) is None
    assert build_grid(table(rows, [50, 160])) is not None


def test_rules_only_at_head_and_foot_keep_body_rows_apart() -> None:
    # booktabs: a rule over the head, one under it, one over a note; the body between
    # two rules is many rows, not one row of wrapped cells
    rows = [["Region", "Sales"], ["North", "120"], ["South", "98"], ["West", "143"],
            ["East", "87"], ["Source: survey", ""]]
    words = table(rows, [50, 160])
    rules = [BBox(x0=45, y0=y, x1=200, y1=y + 0.5) for y in (98.0, 114.0, 178.0)]
    grid = build_grid(words, rules)
    assert grid is not None
    assert texts(grid)[:5] == rows[:5]


def test_ruled_rows_join_their_wrapped_lines() -> None:
    # every row ruled: a key wrapped onto a second line in capitals is still one cell
    words = table([["Register", "Value"], ["USER or", "The user"], ["SESSION_USER", ""],
                   ["SYSTEM_USER", "The id"], ["CURRENT_USER", "The one"]], [50, 160])
    rules = [BBox(x0=45, y0=y, x1=220, y1=y + 0.5) for y in (98.0, 114.0, 146.0, 162.0, 178.0)]
    grid = build_grid(words, rules)
    assert grid is not None
    assert texts(grid) == [["Register", "Value"], ["USER or SESSION_USER", "The user"],
                           ["SYSTEM_USER", "The id"], ["CURRENT_USER", "The one"]]


def test_ruled_groups_of_data_rows_stay_rows() -> None:
    # a rule under each topic's rows, not each row: a line with its own key and figures
    # is a row of its own
    rows = [["Task", "Level", "Score"], ["1", "Easy", "0.87"], ["2", "Normal", "0.88"],
            ["3", "Easy", "0.27"], ["4", "Normal", "0.72"], ["5", "Easy", "0.42"]]
    words = table(rows, [50, 100, 160])
    rules = [BBox(x0=45, y0=y, x1=220, y1=y + 0.5) for y in (98.0, 114.0, 146.0, 178.0)]
    grid = build_grid(words, rules)
    assert grid is not None and texts(grid) == rows


def test_a_heading_on_two_close_lines_in_a_head_without_a_key_is_one_cell() -> None:
    """The key column is empty in the head; "legal aid" sits under "State funded" at the
    font's leading (closer than the rows), so it is that heading's second line."""
    words = (phrase("State funded", 200, 100) + phrase("CSOs", 300, 100)
             + phrase("legal aid", 205, 113)
             + table([["Children", "x", "x"], ["Women", "x", ""], ["Migrants", "", "x"]],
                     [50, 220, 305], top=135, pitch=18))
    grid = build_grid(words)
    assert grid is not None
    assert texts(grid) == [["", "State funded legal aid", "CSOs"], ["Children", "x", "x"],
                           ["Women", "x", ""], ["Migrants", "", "x"]]


def test_rows_over_a_key_centred_lower_down_stay_rows() -> None:
    """A group's key centred on its second row ("Fruit" beside "Pears"): the row above
    it leaves the key empty too, but it lies a row's pitch under the head, not a line's
    leading, so it is no heading's second line."""
    words = table([["", "Item", "Colour"], ["", "Apples", ""], ["Fruit", "Pears", "green"],
                   ["Roots", "Beets", "red"]], [50, 150, 250], pitch=18)
    grid = build_grid(words)
    assert grid is not None
    assert [row[1] for row in texts(grid)] == ["Item", "Apples", "Pears", "Beets"]
