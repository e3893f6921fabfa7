"""Developer tooling: the local services a laptop runs in place of production's (the embedded
Kafka broker, a Spark Connect server started from the pyspark wheel) and the Spark driver's class
archive. Nothing here is imported by the assets or the resources."""
