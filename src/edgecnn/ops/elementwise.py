"""(elementwise operators: being written.)"""
