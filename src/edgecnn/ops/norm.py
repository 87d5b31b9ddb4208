"""(norm operators: being written.)"""
