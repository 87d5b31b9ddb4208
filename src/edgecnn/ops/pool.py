"""(pool operators: being written.)"""
