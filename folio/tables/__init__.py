"""Tables on a page: the grid of ruled lines, the rows and the columns of text, and
the markdown a table becomes.
"""
