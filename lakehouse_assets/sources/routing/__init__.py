"""A route-by-type source: change notices routed to one table per document type, the documents
read from their store."""
