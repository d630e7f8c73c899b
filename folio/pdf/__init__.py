"""The PDF itself: Ghostscript's repair and compression, and the page worker (pdfium in a
child process forked from a pre-imported zygote, with a memory cap and a timeout) that
reads each page's text layer, plans its render and renders it, one JSON line a page."""
