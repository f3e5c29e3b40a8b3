"""One module per CLI command; each imports heavy libraries only inside its function body."""
