"""What is on a page, and how folio reads it: the layout model and its labels, the
route (text layer or OCR) and the answer gate, the quality of a page's text and
the agreement between two readings of it, headings, running heads and the order of
captions.

Pure logic over a page's text, boxes and pixels; the process that renders and OCRs
pages is :mod:`folio.pdf`, the engines that read them :mod:`folio.engines`.
"""
