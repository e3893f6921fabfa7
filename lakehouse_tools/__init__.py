"""The tooling, outside the code location Dagster loads: the ``lakehouse`` command (``cli.py``,
``admin.py``), the local services a laptop runs in place of production's (the embedded Kafka
broker, a Spark Connect server started from the pyspark wheel, PostgreSQL, Kafka Connect, an S3
server), the sample data and demos, and the install's steps (the pinned jars, the product's Java
classes, the Spark driver's class archive). Nothing in ``lakehouse_assets`` or ``resources``
imports it."""
