"""A stand-in for the horovod package that maps horovod.torch onto arcreduce.torch."""
