"""llmdeck.checks"""
