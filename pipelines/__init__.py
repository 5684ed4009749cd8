"""PySpark jobs that feed data pipelines from Kafka topics (installed as odradek.pipelines).

Each job is also a plain script for ``spark-submit``: it imports nothing from Odradek, so it runs
against any Kafka-compatible cluster and needs only PySpark and Spark's Kafka connector.
"""
