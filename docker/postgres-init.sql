-- The catalog's metastore (docs/catalog.md), beside Dagster's database: run by the postgres
-- image once, when its volume is new. The Spark server creates Hive's tables in it.
CREATE DATABASE metastore;
