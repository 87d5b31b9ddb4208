"""(dense operators: being written.)"""
