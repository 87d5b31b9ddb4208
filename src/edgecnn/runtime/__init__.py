"""Everything between a Graph and a result: options, type inference, plans, execution."""
