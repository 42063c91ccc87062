"""Names shared by the specs and what reads their records, without pydantic."""

CLUSTER_SIZE = "instance_count"  # a tuning range over this name varies the trials' workers
