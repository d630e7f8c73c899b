"""A document's section hierarchy: the level of each heading (1 a title or chapter, 2 a
section under it, ...), for the markdown's ``#`` marks and the chunks' heading paths.

What belongs here: pure logic that reads levels from what a document shows (a heading's
numbering, its type size, the PDF's outline, a vision model's own ``#`` marks) and sets
:attr:`folio.models.Block.level`. How headings are found on a page is elsewhere
(:mod:`folio.page.headings`, the engines, the layout model).
"""
