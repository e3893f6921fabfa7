"""Silver from bronze, for every pipeline: the step each parsed table takes (``step``), the
tables parsed by fixed rules (``parsed``), what their writes took (``accounting``) and how the
tables that grow with time are laid out by days (``layout``)."""
