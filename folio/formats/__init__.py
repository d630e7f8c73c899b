"""What kinds of input file folio reads and how each becomes pages.

Every entry under a source is told apart by its content (:mod:`.detect`, magic bytes and,
for ZIP and OLE2 containers, their inner entries), never by its name alone:

- ``pdf``: read as today (Ghostscript, pdfium in the page worker);
- ``image`` (PNG, JPEG, TIFF, WebP, BMP, GIF, JPEG 2000): each frame a page, decoded by
  Pillow in the page worker child (:mod:`.images`), sized from its pixels and DPI
  (:mod:`.image_pages`);
- ``office`` (DOCX, PPTX, XLSX, ODT, ODP, ODS, RTF, DOC, PPT, XLS): read from their own
  structure (:mod:`.office_read`: DOCX, XLSX and PPTX parsed, the others converted to
  them by LibreOffice first, ``folio.formats.office``), pages of blocks with no OCR; the
  document keeps the original file's identity and hash;
- ``text`` (plain text, markdown, HTML) and ``unsupported``: not read; the entry ends as a
  ``skipped`` outcome with its reason (docs/inputs.md says why).
"""
