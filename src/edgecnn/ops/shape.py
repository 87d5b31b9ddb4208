"""(shape operators: being written.)"""
