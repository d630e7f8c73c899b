"""OCR engines: each turns one prepared page into blocks and markdown behind one
interface (:mod:`.base`), chosen by name (:mod:`.registry`): tesseract, RapidOCR, the
text layer, and vision models behind an OpenAI-compatible server (:mod:`.openai_engine`,
spread over several servers by :mod:`.dispatch`). What a model's answer means is
:mod:`folio.parsers`; the server itself is :mod:`folio.gpu`."""
