"""results.json: typed result classes, the one builder that makes them, the schema and the files."""
