"""Finding a tool: the lexical index, the optional semantic ranker and their fusion, scoped to a view."""
