"""What a vision model's answer means: one parser per output format (olmOCR 2's front
matter and markdown, Chandra's HTML blocks, plain markdown), each turning an answer into
folio's blocks as the model's own pipeline reads it."""
