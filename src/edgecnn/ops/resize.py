"""(resize operators: being written.)"""
