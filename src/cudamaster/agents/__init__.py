"""The optimizer: planner, coder, compiler and debug agents in a resumable loop."""
