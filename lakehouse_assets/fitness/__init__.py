"""The fitness reference pipeline: a wearable-fitness company's topics and landing files into
silver tables and the two gold reports, on the platform."""
