"""Silver, for every pipeline: what a table has not consumed of its upstream (``changes``), the
step a table parsed from bronze takes (``step``), the tables parsed by fixed rules (``parsed``),
what their writes took (``accounting``), and how the tables that grow with time are laid out by
days (``layout``)."""
