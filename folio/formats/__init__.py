"""What kinds of input file folio reads and how each becomes pages."""
