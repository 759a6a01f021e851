"""Elastic training (Horovod's horovod.torch.elastic) is not built in arcreduce: a job keeps the
ranks it started with. Importing this module says so instead of failing on a missing name."""
raise ImportError("arcreduce.torch.elastic: elastic training (ranks joining or leaving a running "
                  "job) is not built in arcreduce; see docs/pytorch.md, \"Coming from Horovod\"")
