"""LLM providers behind one small interface (see base.py); choose one with make_provider()."""
