"""Max, average and global pooling on the CPU: ``steps`` (prepared per plan) over ``loops`` (compiled)."""
