"""A source's declaration: its fields (model.py), the rules across them (rules.py), its file and
the errors that name the file's line (files.py, errors.py), and the fields, expectations and
routing block it may hold."""
