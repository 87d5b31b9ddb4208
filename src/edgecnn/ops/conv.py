"""(conv operators: being written.)"""
