"""Figures as images: one ``Picture`` block per figure, its crop beside document.md.

What belongs here: finding a page's figure regions and turning them into Picture blocks
(:mod:`.regions`: the layout model's figure regions and pdfium's image objects on the CPU
path, a vision model's own Image/Figure boxes, olmOCR's ``![alt](...)`` matched to layout
regions; :mod:`.plan`: when a vision model's run needs the layout model for that),
rendering and encoding their crops in the page worker's child (:mod:`.crops`), writing
the crops to the sink (:mod:`.store`), the page markdown's links to them (:mod:`.links`)
and what a figure's chunk says (:mod:`.text`). Everything but :mod:`.store` and the
child side of :mod:`.crops` is pure. docs/figures.md is the user's page.
"""
