"""(reduce operators: being written.)"""
