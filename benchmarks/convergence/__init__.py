"""Convergence under scale-out: AdaScale against fixed lr scaling, and the asynchronous
parameter server's remedies for staleness."""
