"""arsched: AllReduce scheduling for data-center and GPU-cluster networks."""
