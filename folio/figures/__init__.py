"""Figures as images: one ``Picture`` block per figure, its crop beside document.md.

What belongs here: finding a page's figure regions and turning them into Picture blocks
(:mod:`.regions`: the layout model's figure regions and pdfium's image objects on the CPU
path, a vision model's own Image/Figure boxes, olmOCR's ``![alt](...)`` matched to layout
regions), rendering and encoding their crops in the page worker's child (:mod:`.crops`),
and writing the crops to the sink and the links to them into the page markdown
(:mod:`.links`, :mod:`.store`). Everything but :mod:`.store` and the child side of
:mod:`.crops` is pure.
"""
